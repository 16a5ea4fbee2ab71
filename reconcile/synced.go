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
//   - a resumed watch from a stored resourceVersion proven served and
//     caught up: the resume check (probe.go) found the stored
//     resourceVersion equal to the server's current one (nothing to catch
//     up); or the watch's events and bookmarks carried the journal to the
//     server's resourceVersion as of the check, or past it (any event or
//     bookmark, where resourceVersions do not compare); or the resume
//     check's list at exactly the stored resourceVersion succeeded and the
//     watch then stayed quiet for resumeProofWait (200 ms): no ERROR frame,
//     and no frame at all, since it opened or since the history it replayed
//     was applied. A watch the server will not serve from a
//     resourceVersion (compacted in etcd, or older than the watch cache
//     keeps) answers so at once, with its first frame, and replays the
//     history it serves at once (within milliseconds on the apiserver
//     measured here); the quiet wait bounds that "at once". It was 1 s,
//     which was most of a restart's time to synced (BENCHMARKS.md).
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

	"k8s.io/apimachinery/pkg/util/resourceversion"
	"k8s.io/utils/clock"
)

// resumeProofWait is how long a watch resumed from a resourceVersion that
// the resume check found served must stay open without an ERROR frame
// before the loop counts it as current.
const resumeProofWait = 200 * time.Millisecond

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
	l.log.Info("synced: the journal is current with the server", "by", how, "offset", head)
}

// proofTimer starts the quiet wait (resumeProofWait) that proves a resumed watch current
// (see the top of this file), or marks it current at once. It returns nil
// when no wait is needed or possible; the caller stops the timer.
func (l *Loop) proofTimer(s stateWatch) clock.Timer {
	switch {
	case l.HasSynced() || s.current == "":
		// Synced already, or no resume check ran: only frames prove it.
		return nil
	case s.current == s.rv:
		l.markSynced("the stored resourceVersion is the server's current one")
		return nil
	}
	return l.opts.Clock.NewTimer(resumeProofWait)
}

// provenByFrames marks the loop synced, and reports true, when a batch of
// a resumed watch (n events and bookmarks, ending in next) carried the
// journal to the server's resourceVersion as of the resume check
// (s.current) or past it; where they do not compare, any frame does.
func (l *Loop) provenByFrames(s stateWatch, next state, n int) bool {
	switch next.(type) {
	case stateList, stateBackoff:
		return false
	}
	if n == 0 {
		return false
	}
	if s.current != "" {
		applied := l.Status().ResourceVersion
		if cmp, err := resourceversion.CompareResourceVersion(applied, s.current); err == nil && cmp < 0 {
			return false
		}
	}
	l.markSynced("the resumed watch caught up with the server")
	return true
}

// stopped records the end of Run and its error for WaitForSync.
func (l *Loop) stopped(err error) {
	l.update(func(st *Status) {
		st.Phase = PhaseStopped
		l.runErr = err
	})
}
