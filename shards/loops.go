package shards

import (
	"context"
	"time"

	"github.com/watchjournal/watchjournal/journal/inspect"
	"github.com/watchjournal/watchjournal/reconcile"
)

// Loops is the member's reconcile loop, whichever runs at the time: a
// member replaces its loop at every range change. It implements
// inspect.Loop, for inspect.Serve (package metrics takes one
// *reconcile.Loop and does not follow the replacements yet).
type Loops struct{ m *Member }

// Loops returns the member's loops.
func (m *Member) Loops() Loops { return Loops{m} }

func (ls Loops) current() *reconcile.Loop {
	ls.m.mu.Lock()
	defer ls.m.mu.Unlock()
	return ls.m.loop
}

// Status returns the running loop's Status; with none running (the
// member is joining, resharding, lost or stopped), a Status whose Phase is
// reconcile.PhaseStopped.
func (ls Loops) Status() reconcile.Status {
	if l := ls.current(); l != nil {
		return l.Status()
	}
	return reconcile.Status{Phase: reconcile.PhaseStopped}
}

// Verify asks the running loop, if any, for a verify (reconcile.Loop.Verify).
func (ls Loops) Verify() {
	if l := ls.current(); l != nil {
		l.Verify()
	}
}

// WaitFor waits until cond holds for Status (checked on every change of the
// running loop, and every 100 ms across loop changes), or ctx is done
// (ctx.Err()).
func (ls Loops) WaitFor(ctx context.Context, cond func(reconcile.Status) bool) error {
	for {
		if cond(ls.Status()) {
			return nil
		}
		wctx, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
		if l := ls.current(); l != nil {
			_ = l.WaitFor(wctx, cond)
		} else {
			<-wctx.Done()
		}
		cancel()
		if ctx.Err() != nil {
			return ctx.Err()
		}
	}
}

var _ inspect.Loop = Loops{}

// InspectStatus returns Status as the journal's socket reports it
// (inspect.Loop): the running loop's, or a stopped one's.
func (ls Loops) InspectStatus() inspect.LoopStatus {
	if l := ls.current(); l != nil {
		return l.InspectStatus()
	}
	return inspect.LoopStatus{Phase: inspect.PhaseStopped}
}

// WaitForInspect is WaitFor for a condition on the socket's status
// (inspect.Loop). cond sees the running loop's status as of each wake-up.
func (ls Loops) WaitForInspect(ctx context.Context, cond func(inspect.LoopStatus) bool) error {
	return ls.WaitFor(ctx, func(reconcile.Status) bool { return cond(ls.InspectStatus()) })
}
