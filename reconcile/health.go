package reconcile

// Health: what a manager's healthz and readyz probes ask of a loop
// (jcache.HealthzCheck and ReadyzCheck wrap them as controller-runtime
// healthz.Checkers).
//
// Alive: the loop has not stopped on a fatal error (ErrJournal: the file
// cannot be written; ErrRejected). A loop not yet run counts as alive (a
// standby's source starts only once it leads), and so does one in backoff:
// backoff is how the loop survives an apiserver outage, which a restart of
// the process would not cure.
//
// Ready: synced (HasSynced: the journal is known current with the server),
// running, and not failing for longer than a bound (Status.FailingSince):
// a loop that has met only errors for that long serves a journal that
// falls behind the server.

import (
	"errors"
	"fmt"
	"time"
)

// DefaultFailingBound is the failing time past which Ready reports a loop
// not ready: four times the default MaxBackoff, so that a few retries of
// a passing apiserver hiccup keep the loop ready.
const DefaultFailingBound = 2 * time.Minute

// ErrNotReady is matched (errors.Is) by every error Ready returns.
var ErrNotReady = errors.New("reconcile: loop not ready")

// Alive returns nil unless Run has returned with an error: then that error
// (ErrJournal, ErrRejected). A loop not yet run, running (backoff
// included), or stopped by its context is alive.
func (l *Loop) Alive() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.runErr
}

// Ready returns nil when the loop is running, synced (HasSynced) and has
// not been failing (Status.LastError set, since Status.FailingSince) for
// longer than failingBound (0: DefaultFailingBound). Otherwise it returns
// an error matching ErrNotReady that says why: not synced yet, stopped
// (with Run's error), or failing since when and with what.
func (l *Loop) Ready(failingBound time.Duration) error {
	failingBound = positive(failingBound, DefaultFailingBound)
	st := l.Status()
	l.mu.Lock()
	runErr := l.runErr
	l.mu.Unlock()
	switch {
	case st.Phase == PhaseStopped && runErr != nil:
		return fmt.Errorf("%w: stopped: %w", ErrNotReady, runErr)
	case st.Phase == PhaseStopped:
		return fmt.Errorf("%w: stopped", ErrNotReady)
	case !st.Synced:
		return fmt.Errorf("%w: not synced yet (phase %s)", ErrNotReady, st.Phase)
	case st.LastError != nil && l.opts.Clock.Since(st.FailingSince) > failingBound:
		return fmt.Errorf("%w: failing since %s (more than %s): %w", ErrNotReady,
			st.FailingSince.UTC().Format(time.RFC3339), failingBound, st.LastError)
	}
	return nil
}
