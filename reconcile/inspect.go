package reconcile

// A Loop is what the journal's socket (package journal/inspect) reports and
// asks for verifies: inspect owns that small interface (inspect.Loop) and
// the Status it reads, and the Loop implements it here, so inspect, below
// this package, never imports it.

import (
	"context"

	"github.com/watchjournal/watchjournal/journal/inspect"
)

var _ inspect.Loop = (*Loop)(nil)

// InspectStatus returns Status as the journal's socket reports it
// (inspect.Loop): for inspect.Serve.
func (l *Loop) InspectStatus() inspect.LoopStatus { return l.Status().inspect() }

// WaitForInspect is WaitFor for a condition on the socket's status
// (inspect.Loop).
func (l *Loop) WaitForInspect(ctx context.Context, cond func(inspect.LoopStatus) bool) error {
	return l.WaitFor(ctx, func(s Status) bool { return cond(s.inspect()) })
}

// inspect returns the fields of s that the socket reports.
func (s Status) inspect() inspect.LoopStatus {
	return inspect.LoopStatus{
		Phase: string(s.Phase), ResourceVersion: s.ResourceVersion, Synced: s.Synced, LastError: s.LastError,
		Lists: s.Lists, Watches: s.Watches, Gone: s.Gone, ListRestarts: s.ListRestarts,
		IdleRestarts: s.IdleRestarts, Events: s.Events, Verifies: s.Verifies, Divergences: s.Divergences,
		ListPages: s.ListPages, ListObjects: s.ListObjects, ListMode: string(s.ListMode),
		ListModeReason: s.ListModeReason, Encoding: s.Encoding, ShardMode: string(s.ShardMode),
	}
}
