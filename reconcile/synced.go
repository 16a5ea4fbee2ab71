package reconcile

// When the journal is known current with the server (Status.Synced,
// HasSynced, WaitForSync). Synced turns true once, and stays true for the
// life of the Loop (the shape of client-go's HasSynced: the first sync),
// on something the server said, never on a quiet interval, at the first
// of:
//
//   - a complete list committed (the initial list, or a relist: after a 410,
//     a rewind, or a resume check that found the stored resourceVersion
//     compacted): the journal holds the server's state at the list's
//     resourceVersion (Status.SyncedBy "list");
//   - the resume check (probe.go) found the stored resourceVersion equal
//     to the server's current one: nothing to catch up ("current");
//   - a resumed watch's events or bookmarks carried the journal to the
//     server's resourceVersion as of the check, or past it (any event or
//     bookmark where resourceVersions do not compare): a frame other than
//     ERROR says the server accepted the watch, as it sends its refusal
//     (410) before any other frame, and the resourceVersion says the
//     journal caught up ("caught up");
//   - the server ended a resumed watch normally, at its timeoutSeconds,
//     with no ERROR frame: it served the watch from the stored
//     resourceVersion, and sent the history it had from there before its
//     end ("served"). To make that answer come soon on a quiet resource,
//     a resumed watch that still needs its proof asks for a short
//     timeoutSeconds (proofWatchTimeout, 1 s); the watch that follows has
//     the usual WatchTimeout. Its events may prove it first ("caught
//     up").
//
// It is never true before a 410 that the resume would meet, however late
// the 410 arrives: a compacted resourceVersion fails the resume check, so
// the loop relists first, and a watch refused later (the watch cache's
// window is shorter than etcd's history, a proxy delays the answer) gives
// no proof before its ERROR frame. What a slow server costs is time to
// synced, not a false one: a resume whose watch gives no frame and no
// normal end (a stalled link) stays unsynced until IdleTimeout replaces
// the watch and a later one proves it.
//
// The one thing taken on trust: that an apiserver which ends a watch
// normally has sent the history it held from the watch's resourceVersion
// (it sends that history first, at once, from memory or from one etcd
// read); a watch ended by a connection cut (no terminating chunk) proves
// nothing.

import (
	"context"
	"errors"
	"io"
	"time"
)

// proofWatchTimeout is the timeoutSeconds of a resumed watch that has yet
// to prove the resume (see the top of this file): its normal end is the
// proof on a quiet resource. One second, the least timeoutSeconds says: it
// is what a quiet restart whose server's resourceVersion moved on in other
// resources (the usual case) waits to be synced. The watch cache's
// pre-deadline bookmark (sent only to watches longer than two seconds) is
// not needed: the normal end is the proof.
const proofWatchTimeout = 1 * time.Second

// ErrStopped is returned by WaitForSync when Run has returned, with nil,
// before the loop synced: its context ended.
var ErrStopped = errors.New("reconcile: the loop stopped before it synced")

// HasSynced reports whether the journal is known current with the server
// (Status.Synced says when, and Status.SyncedBy by what proof). It has the
// shape of client-go's cache.InformerSynced, so it can be passed to
// cache.WaitForCacheSync. Safe for concurrent use.
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

// Ways Synced turned true (Status.SyncedBy).
const (
	syncedByList     = "list"
	syncedByCurrent  = "current"
	syncedByCaughtUp = "caught up"
	syncedByServed   = "served"
)

// markSynced turns Synced true, once, with the journal's head offset; by
// names the proof (Status.SyncedBy).
func (l *Loop) markSynced(by string) {
	if l.HasSynced() {
		return
	}
	head, err := l.j.Head()
	if err != nil {
		// The head is read from the open file; should it fail, the next
		// proof tries again.
		return
	}
	l.update(func(st *Status) { st.Synced, st.SyncedOffset, st.SyncedBy = true, head, by })
	l.log.Info("synced: the journal is current with the server", "by", by, "offset", head)
	l.verifyAfterRestart(by)
}

// proving reports whether the resumed watch s is to prove the resume: the
// loop has not synced, and the resume check did not read the server's
// resourceVersion equal to s's (which proves the resume at once).
func (l *Loop) proving(s stateWatch) bool {
	if l.HasSynced() {
		return false
	}
	if s.current != "" && s.current == s.rv {
		l.markSynced(syncedByCurrent)
		return false
	}
	return true
}

// provenByFrames marks the loop synced, and reports true, when a batch of
// a resumed watch (n events and bookmarks, ending in next) carried the
// journal to the server's resourceVersion as of the resume check
// (s.current) or past it; where they do not compare, any frame does.
func (l *Loop) provenByFrames(s stateWatch, next state, n int) bool {
	switch next.(type) {
	case stateList, stateVerify, stateBackoff:
		return false
	}
	if n == 0 {
		return false
	}
	if s.current != "" && below(l.Status().ResourceVersion, s.current) {
		return false
	}
	l.markSynced(syncedByCaughtUp)
	return true
}

// servedToEnd reports whether a batch ends with the server's normal end of
// the watch (the response's terminating chunk: io.EOF, not a cut), after
// no ERROR frame: plan then returns the watch that resumes it.
func servedToEnd(batch []frame, next state) bool {
	if _, ok := next.(stateWatch); !ok || len(batch) == 0 {
		return false
	}
	// The stream returns io.EOF itself only at a frame boundary of a
	// response that ended normally; a cut is io.ErrUnexpectedEOF or a
	// network error.
	return batch[len(batch)-1].err == io.EOF
}

// stopped records the end of Run and its error for WaitForSync.
func (l *Loop) stopped(err error) {
	l.update(func(st *Status) {
		st.Phase = PhaseStopped
		l.runErr = err
	})
}
