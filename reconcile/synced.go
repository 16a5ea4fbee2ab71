package reconcile

// When the journal is known current with the server (Status.Synced,
// HasSynced, WaitForSync). Synced turns true once, and stays true for the
// life of the Loop (the shape of client-go's HasSynced: the first sync),
// at the first of:
//
//   - a complete list committed (the initial list, or a relist: after a 410,
//     a rewind, or a resume check that found the stored resourceVersion
//     compacted): the journal holds the server's state at the list's
//     resourceVersion;
//   - a resumed watch from a stored resourceVersion proven served:
//     the resume check (probe.go) found the stored resourceVersion equal
//     to the server's current one (nothing to catch up); or the watch
//     delivered an event or bookmark (the server serves the history after
//     it); or the resume check's list at exactly the stored resourceVersion
//     succeeded and the watch then stayed open for resumeProofWait (1 s)
//     without an ERROR frame. A watch the server will not serve from a
//     resourceVersion (compacted in etcd, or older than the watch cache
//     keeps) answers so at once, with its first frame; the wait bounds
//     that "at once".
//
// It is never true before a 410 that the resume would meet: a compacted
// resourceVersion fails the resume check, so the loop relists first and
// turns Synced true only after that relist is committed.
//
// Caught up with the head as of sync: Status.SyncedOffset is the journal's
// head offset when Synced turned true. A consumer that has read (or
// committed) every offset up to SyncedOffset has seen the server's state as
// of the sync; see Loop.WaitForSync.

import (
	"context"
	"errors"
	"time"

	"go.uber.org/zap"
)

// resumeProofWait is how long a watch resumed from a resourceVersion that
// the resume check found served must stay open without an ERROR frame
// before the loop counts it as current.
const resumeProofWait = time.Second

// ErrStopped is returned by WaitForSync when Run has returned, with nil,
// before the loop synced: its context ended.
var ErrStopped = errors.New("reconcile: the loop stopped before it synced")

// HasSynced reports whether the journal is known current with the server
// (Status.Synced): true after a complete list, or after a resumed watch
// proved its resourceVersion served; never before a 410 the resume would
// meet. Once true it stays true. It has the shape of client-go's
// cache.InformerSynced, so it can be passed to cache.WaitForCacheSync.
// Safe for concurrent use.
func (l *Loop) HasSynced() bool { return l.Status().Synced }

// WaitForSync blocks until HasSynced is true (nil), ctx is done
// (ctx.Err()), or Run has returned: with its error (ErrJournal,
// ErrRejected), or ErrStopped when Run ended with its context. Safe for
// concurrent use.
//
// To act on a state at least as new as the server's at sync, a consumer
// waits for sync, then reads or consumes up to Status().SyncedOffset:
//
//	if err := loop.WaitForSync(ctx); err != nil { ... }
//	upTo := loop.Status().SyncedOffset
//	// consume events; once the consumer's position is past upTo,
//	// it has caught up with the server as of the sync.
func (l *Loop) WaitForSync(ctx context.Context) error {
	if err := l.WaitFor(ctx, func(s Status) bool { return s.Synced || s.Phase == PhaseStopped }); err != nil {
		return err
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	switch {
	case l.status.Synced:
		return nil
	case l.runErr != nil:
		return l.runErr
	}
	return ErrStopped
}

// markSynced turns Synced true, once, with the journal's head offset.
func (l *Loop) markSynced(how string) {
	if l.HasSynced() {
		return
	}
	head, err := l.j.Head()
	if err != nil {
		// The head is read from the open file; should it fail, the next
		// proof tries again.
		return
	}
	l.update(func(st *Status) { st.Synced, st.SyncedOffset = true, head })
	l.log.Info("synced: the journal is current with the server", zap.String("by", how), zap.Uint64("offset", head))
}

// proofTimer starts the bounded wait that proves a resumed watch current
// (see the top of this file), or marks it current at once. It returns nil
// when no wait is needed or possible.
func (l *Loop) proofTimer(s stateWatch) <-chan time.Time {
	switch {
	case l.HasSynced() || s.current == "":
		// Synced already, or no resume check ran: only a frame proves it.
		return nil
	case s.current == s.rv:
		l.markSynced("the stored resourceVersion is the server's current one")
		return nil
	}
	return l.opts.Clock.After(resumeProofWait)
}

// provenByFrames marks the loop synced when a watch delivered events or
// bookmarks (n) and did not end in a relist or a failure.
func (l *Loop) provenByFrames(next state, n int) {
	switch next.(type) {
	case stateList, stateBackoff:
		return
	}
	if n > 0 {
		l.markSynced("the resumed watch delivered events")
	}
}

// stopped records the end of Run and its error for WaitForSync.
func (l *Loop) stopped(err error) {
	l.update(func(st *Status) {
		st.Phase = PhaseStopped
		l.runErr = err
	})
}
