package reconcile

// The list state: one complete list, then the watch from its
// resourceVersion. It picks the lister (lister.go: streaming, paginated,
// or full for the first paginated list of an empty index), feeds its
// batches to the relist consumer (relist.go), and returns the next state.
// A list that must start again does not loop here: Run steps into the
// state listFailed returns.

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/watchjournal/watchjournal/journal"
)

// maxListRestarts is how many times in a row a list starts again after its
// snapshot went (an expired continue token, a streaming list's 410) before
// the loop backs off.
const maxListRestarts = 3

// list runs one complete list, a streaming one where the server serves it
// (listmode.go), commits its difference with the index, and returns the
// watch from its resourceVersion (on the same connection after a
// streaming list).
func (l *Loop) list(ctx context.Context, s stateList) (state, error) {
	if err := l.detectShard(ctx); err != nil {
		if ctx.Err() != nil {
			return s, nil
		}
		return l.fail(s.again(), err)
	}
	streaming := !s.verify && !s.paged && l.streaming()
	start := l.opts.Clock.Now()
	rv, staged, first, last, open, err := l.listOnce(ctx, s, streaming)
	if err != nil {
		return l.listFailed(ctx, s, streaming, err)
	}
	if streaming {
		l.streamed()
	}
	l.listed(s, start, rv, staged, first, last)
	return stateWatch{rv: rv, goneOrigin: journal.OriginRelist, fromList: true, open: open}, nil
}

// listOnce reads one list with the lister that fits, feeds its batches to
// the relist consumer, and commits. It returns the list's resourceVersion,
// the number of events committed and their offsets (0, 0 for none), and,
// after a streaming list, its connection past the initial events. When it
// fails, what it staged is dropped before it returns.
func (l *Loop) listOnce(ctx context.Context, s stateList, streaming bool) (rv string, n int, first, last uint64, open *stream, err error) {
	r, err := l.beginRelist(s)
	if err != nil {
		return "", 0, 0, 0, nil, err
	}
	defer r.abort()
	var lr lister
	var sl *streamLister
	switch {
	case streaming:
		sl = &streamLister{l: l}
		defer sl.close()
		lr, r.async = sl, true
	case s.verify:
		lr = pageLister{l: l, exactRV: s.exactRV()}
	default:
		empty, err := l.indexEmpty()
		if err != nil {
			return "", 0, 0, 0, nil, journalError{err}
		}
		// Nothing to diff into an empty index: one full read per page.
		r.fresh = empty && l.inherit == nil
		lr = pageLister{l: l}
		if r.fresh {
			lr = fullLister{l: l}
		}
	}
	if rv, err = lr.each(ctx, func(b batch) error { return r.add(ctx, b) }); err != nil {
		return "", 0, 0, 0, nil, err
	}
	if n, first, last, err = r.commit(ctx, rv); err != nil {
		return "", 0, 0, 0, nil, err
	}
	if streaming {
		open = sl.handover()
	}
	return rv, n, first, last, open, nil
}

// listFailed returns the state after list s failed with err: the same list
// again at once (after an expired snapshot, at most maxListRestarts times
// in a row; with lookups when it broke key order; with full pages when the
// server serves no metadata-only lists), in pages when the server refused
// a streaming list, or the backoff. Only a journal error is fatal.
func (l *Loop) listFailed(ctx context.Context, s stateList, streaming bool, err error) (state, error) {
	var je journalError
	isJournal := errors.As(err, &je)
	if ctx.Err() != nil {
		if isJournal && !errors.Is(je.err, journal.ErrNoSpace) {
			// A journal error as ctx ended is still Run's to return.
			return nil, fmt.Errorf("%w: %w", ErrJournal, je.err)
		}
		return s, nil
	}
	retry := s.again()
	var refused errNoStreaming
	switch {
	case isJournal && errors.Is(je.err, journal.ErrNoSpace):
		// The staged list was dropped; try it all again later.
		return l.fail(retry, fmt.Errorf("%w: %w", ErrJournal, je.err))
	case isJournal:
		return nil, fmt.Errorf("%w: %w", ErrJournal, je.err)
	case errors.As(err, &refused):
		l.fallBack(refused.err)
		s.restarts, s.paged = 0, true
		return s, nil
	case errors.Is(err, errFullPages) && !l.fullPages:
		l.log.Info("the apiserver serves no metadata-only lists: relisting with full pages")
		l.fullPages = true
		return s, nil
	case errors.Is(err, errUnordered) && !s.unordered:
		if streaming {
			l.log.Info("streaming list: initial events not in key order: listing again with lookups")
		} else {
			l.log.Info("list pages not in key order: relisting with lookups")
		}
		s.unordered = true
		return s, nil
	case streaming && isGone(err):
		l.update(func(x *Status) { x.ListRestarts++ })
		if s.restarts++; s.restarts >= maxListRestarts {
			return l.fail(retry, fmt.Errorf("%w: streaming list: 410 %d times in a row: %w", ErrList, s.restarts, err))
		}
		l.log.Info("streaming list answered 410: starting it again", "error", err)
		return s, nil
	case !streaming && (errors.Is(err, errSnapshotGone) || errors.Is(err, errFullPages) || errors.Is(err, errUnordered)):
		l.update(func(x *Status) { x.ListRestarts++ })
		if s.restarts++; s.restarts >= maxListRestarts {
			return l.fail(retry, fmt.Errorf("%w: continue token expired %d times in a row", ErrList, s.restarts))
		}
		l.log.Info("continue token expired (410) mid-list: starting the list again from the first page")
		return s, nil
	case streaming:
		return l.fail(retry, fmt.Errorf("%w: streaming list: %w", ErrList, err))
	}
	return l.fail(retry, fmt.Errorf("%w: %w", ErrList, err))
}

// listed records a complete list s that began at start and committed
// staged events at offsets first..last, at resourceVersion rv.
func (l *Loop) listed(s stateList, start time.Time, rv string, staged int, first, last uint64) {
	l.succeed()
	lost := l.divergences(s, staged, first, last)
	l.scheduleVerify()
	l.update(func(x *Status) {
		x.countList(s, x.ResourceVersion == "")
		x.Lists++
		x.ResourceVersion = rv
		x.Journaled.add(s.origin, l.staging)
		x.Events += staged
		if s.verify {
			x.Verifies++
			x.Divergences += lost
			x.LastVerifyFirst, x.LastVerifyLast = first, last
		}
	})
	l.markSynced(syncedByList)
	if lost > 0 {
		l.log.Info("verify: the watch had lost events; the relist journaled the difference",
			"events", lost, "resourceVersion", rv)
	}
	l.log.Info("list complete", "resourceVersion", rv, "events", staged,
		"origin", string(s.origin), "took", time.Since(start))
}
