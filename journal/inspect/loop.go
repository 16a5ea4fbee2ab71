package inspect

// The socket reports the loop that writes the journal and asks it for
// verifies, but package inspect sits below that loop (package reconcile
// imports journal; journal/... imports no package above it). So inspect
// owns the little it needs, as raft owns the LogStore that raft-boltdb
// implements: the Loop interface and the LoopStatus it reads. A
// *reconcile.Loop and a shard member's shards.Loops implement Loop, so
// inspect.Serve(ctx, j, loop, nil) takes either as it is.

import "context"

// Loop is what the socket asks of the loop that writes the journal: a
// *reconcile.Loop, a shards.Loops, or a fake in tests.
type Loop interface {
	// InspectStatus returns a snapshot of the loop's state, as /status
	// reports it.
	InspectStatus() LoopStatus
	// Verify asks the loop to relist and diff against the index
	// (anti-entropy) at its next chance; it does not wait.
	Verify()
	// WaitForInspect blocks until cond holds for the loop's state, or ctx
	// is done (ctx.Err()). It is woken by each change of the state.
	WaitForInspect(ctx context.Context, cond func(LoopStatus) bool) error
}

// PhaseStopped is the Phase of a loop that has stopped
// (reconcile.PhaseStopped): a GET /verify waits no longer for it.
const PhaseStopped = "Stopped"

// LoopStatus is the part of a loop's state that the socket reports: the
// fields of reconcile.Status of the same names, with the string types as
// strings. /status and GET /verify send it as JSON (Status), LastError as
// its text.
type LoopStatus struct {
	// Phase is the loop's current state (reconcile.Phase); PhaseStopped
	// once it has stopped.
	Phase string
	// ResourceVersion is the last resourceVersion fully applied.
	ResourceVersion string
	// Synced is true once the journal is known current with the server.
	Synced bool
	// LastError is the error that caused the last backoff, nil after a
	// success.
	LastError error
	// Lists, Watches, Gone, ListRestarts, IdleRestarts and Events are the
	// loop's counters of completed lists, opened watches, 410s, restarted
	// lists, replaced idle watches and appended events.
	Lists, Watches, Gone, ListRestarts, IdleRestarts, Events int
	// Verifies counts anti-entropy relists, Divergences the events they
	// found that the watch had lost.
	Verifies, Divergences int
	// ListPages and ListObjects are the progress of the current list (of
	// the last one outside phase Listing): pages and objects received.
	ListPages, ListObjects int
	// ListMode is how the loop lists ("streaming" or "paginated";
	// reconcile.ListMode), ListModeReason why.
	ListMode, ListModeReason string
	// Encoding is the last response's encoding: "protobuf" or "json";
	// empty before the first.
	Encoding string
	// ShardMode is how a journal bound to a shard range keeps to it
	// ("server", "client", "detecting"; reconcile.ShardMode), empty for an
	// unsharded one.
	ShardMode string
}
