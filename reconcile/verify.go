package reconcile

// Anti-entropy: the verify (when it runs: Options.VerifyInterval, a
// wall-clock deadline kept on the Loop across watches, and Loop.Verify).
// The loop leaves a healthy watch, lists and diffs the list against the index;
// every difference is an event the watch lost (kubernetes/kubernetes#123072).
//
// Like with like: the index holds the state at the resourceVersion the
// journal applied (Status.ResourceVersion); a list at a newer one would
// count as "divergences" the events still on their way on the watch. So the
// verify lists at exactly the applied resourceVersion
// (resourceVersionMatch=Exact) while the server still serves it (a one-item
// list checks that first), and then resumes the watch from it: nothing is
// skipped, and a divergence is only an event the watch really lost.
//
// When the applied resourceVersion is no longer served (etcd compacted it;
// on a quiet resource it does not move), the verify lists at the current
// resourceVersion, journals every difference, and counts as a divergence
// only an ADDED or MODIFIED whose object's resourceVersion compares at or
// below the applied one (the watch should have delivered it). A DELETED
// found then cannot be dated and is journaled without being counted.
//
// The verify lists metadata only, as every relist with a non-empty index
// does (pages.go): its cost is a metadata list, plus full pages only where
// something diverged.
//
// After a restart, one verify runs as soon as the resume is proven,
// whatever VerifyInterval says (also when it is
// negative), and the periodic one goes on as scheduled. Restores happen
// during outages, which is when a watcher restarts: an etcd restored from
// an older snapshot whose revisions have since passed the stored
// resourceVersion is invisible to the resume check (probe.go), and the
// watch from the stored resourceVersion replays a history the index never
// saw. It runs after the sync, never before it: HasSynced is not delayed
// by a list, and the resume proof (synced.go) still means what it says.
// A restart that relisted (a 410, a rewind) has no need of it: that list
// was the check.

import (
	"context"
	"fmt"
	"time"

	"k8s.io/apimachinery/pkg/util/resourceversion"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/watchjournal/watchjournal/journal"
)

// DefaultVerifyInterval is the VerifyInterval of Options whose field is
// zero. Each interval is drawn from [0.8, 1.2) × VerifyInterval, so that
// many journals started together do not list together.
const DefaultVerifyInterval = 10 * time.Minute

// scheduleVerify sets the next verify's deadline, one jittered interval
// from now.
func (l *Loop) scheduleVerify() {
	d := l.opts.VerifyInterval
	if d <= 0 {
		return
	}
	// [0.8, 1.2) × d
	l.verifyAt = l.opts.Clock.Now().Add(wait.Jitter(d*4/5, 0.5))
}

// verifyTimer returns a channel that fires at the verify deadline
// (scheduled now when none is), and its stop function; a nil channel when
// verifies are off.
func (l *Loop) verifyTimer() (<-chan time.Time, func()) {
	if l.opts.VerifyInterval <= 0 {
		return nil, func() {}
	}
	if l.verifyAt.IsZero() {
		l.scheduleVerify()
	}
	t := l.opts.Clock.NewTimer(max(l.verifyAt.Sub(l.opts.Clock.Now()), 0))
	return t.C(), func() { t.Stop() }
}

// verifyCheck runs a verify's first request: a one-item list at exactly
// the applied resourceVersion. It returns the verify's list, at exactly
// that resourceVersion while it is served, at the current one otherwise.
func (l *Loop) verifyCheck(ctx context.Context, s stateVerify) (state, error) {
	next := stateList{origin: journal.OriginRelist, verify: true, applied: s.applied, unordered: s.unordered}
	if s.applied != "" {
		_, err := l.listOne(ctx, s.applied)
		switch {
		case ctx.Err() != nil:
			return s, nil
		case err == nil:
			next.exact = true
		case isGone(err):
			l.log.Info("verify: the applied resourceVersion is no longer served: verifying at the current one",
				"resourceVersion", s.applied)
		default:
			return l.fail(s, fmt.Errorf("%w: verify: list at the applied resourceVersion: %w", ErrList, err))
		}
	}
	return next, nil
}

// divergences returns how many of the staged events that a completed
// verify journaled at offsets first..last are events the watch lost.
func (l *Loop) divergences(s stateList, staged int, first, last uint64) int {
	if !s.verify || staged == 0 {
		return 0
	}
	if s.exact {
		return staged
	}
	n := 0
	for off := first; off <= last && off != 0; {
		evs, err := l.j.Read(off, 1000)
		if err != nil || len(evs) == 0 {
			break
		}
		for _, e := range evs {
			if e.Offset > last {
				break
			}
			if e.Type == journal.Deleted {
				continue
			}
			if cmp, err := resourceversion.CompareResourceVersion(e.ResourceVersion, s.applied); err == nil && cmp <= 0 {
				n++
			}
		}
		off = evs[len(evs)-1].Offset + 1
	}
	return n
}

// verifyAfterRestart asks for the restart's verify (see the top of this
// file) once the loop synced by a resumed watch; a restart that synced by
// a list needs none. Called by markSynced, on Run's goroutine.
func (l *Loop) verifyAfterRestart(by string) {
	if !l.restartVerify {
		return
	}
	l.restartVerify = false
	if by == syncedByList {
		return
	}
	l.log.Info("verifying the resumed journal against the server after the restart")
	l.Verify()
}
