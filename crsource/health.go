package crsource

// Health checks for the manager's probes:
//
//	mgr.AddHealthzCheck("watchjournal-cm", src.HealthzCheck())
//	mgr.AddReadyzCheck("watchjournal-cm", src.ReadyzCheck())
//
// Healthz (liveness): the source has not failed (Err) and its writer is
// alive (reconcile.Loop.Alive): only a fatal error, such as a journal
// file that cannot be written, fails it; a restart may cure that, an
// apiserver outage it would not, so backoff keeps the process alive.
// A source not started yet is alive.
//
// Readyz: started, not failed, synced, and the writer not failing for
// longer than Options.FailingBound (reconcile.Loop.Ready). A
// source starts with its controller, which under leader election is once
// the replica leads. A warm standby (Options.Standby, AddToManager) runs
// its writer on every replica, so its readiness is the writer's: a
// standby whose journal is current is ready before it leads. Without
// Options.Standby a replica that does not lead reports not ready ("not
// started"); use Loop().Ready in a checker of your own where that is
// not what a rollout should wait for.

import (
	"errors"
	"fmt"
	"net/http"

	"sigs.k8s.io/controller-runtime/pkg/healthz"

	wjreconcile "github.com/watchjournal/watchjournal/reconcile"
)

// ErrNotStarted is the readyz error of a source not started yet.
var ErrNotStarted = errors.New("crsource: source not started")

// HealthzCheck returns a liveness checker of the source: an error once
// the source has failed (Err) or its writer stopped on a fatal error
// (reconcile.Loop.Alive); nil before Start, while running and in backoff.
func (s *Source) HealthzCheck() healthz.Checker {
	return func(*http.Request) error {
		if err := s.Err(); err != nil {
			return err
		}
		if s.loop != nil {
			return s.loop.Alive()
		}
		return nil
	}
}

// ReadyzCheck returns a readiness checker of the source: nil once it is
// started, synced and healthy; otherwise ErrNotStarted, the source's Err,
// or an error matching reconcile.ErrNotReady: not synced yet, stopped, or
// (for New, the writer's reconcile.Loop.Ready) failing for longer than
// Options.FailingBound. For a source made by NewFromConsumer, synced is
// its waitForSync having returned.
func (s *Source) ReadyzCheck() healthz.Checker {
	return func(*http.Request) error {
		s.mu.Lock()
		started := s.started
		s.mu.Unlock()
		if !started && !(s.sb != nil && s.sb.Added()) {
			return ErrNotStarted
		}
		if err := s.Err(); err != nil {
			return err
		}
		select {
		case <-s.done:
			return fmt.Errorf("%w: source stopped", wjreconcile.ErrNotReady)
		default:
		}
		if s.loop != nil {
			return s.loop.Ready(s.failing)
		}
		select {
		case <-s.synced:
			return nil
		default:
			return fmt.Errorf("%w: not synced yet", wjreconcile.ErrNotReady)
		}
	}
}
