package reconcile

// The streaming list (KEP-3157; API concepts "Streaming lists"). One watch
// request, resourceVersion unset (a consistent read, also after a 410),
// sendInitialEvents=true, resourceVersionMatch=NotOlderThan and bookmarks
// allowed: the apiserver sends an ADDED for every object, then a BOOKMARK
// annotated k8s.io/initial-events-end "true" whose resourceVersion is the
// state the ADDEDs describe, then watch events from it on the same
// connection.
//
// The ADDEDs are diffed against the index as they stream in, exactly as
// list pages are (list.go): in batches of PageSize objects or fillBytes of
// objects, whichever fills first, each merged with the index range it
// covers (diffRange) while they come in key order, as the watch cache and
// etcd send them, and staged on disk (journal.Relist). The API does not
// promise that order: a batch out of order starts the streaming list
// again with lookups (diffLookup, Relist.MarkSeen, Unseen), as a page out
// of order does. A batch is written while the next is read (stagepipe.go).
// Memory stays bounded by bytes (two batches); nothing is committed
// before the bookmark (except into an empty index, whose ADDEDs the
// journal commits as they come: journal.Relist), and a stream that breaks
// or fails before it changes nothing (the stage is dropped) and the
// streaming list starts again: after the backoff when the server answered with an error or the
// connection broke; at once after a 410 (at most maxListRestarts times in
// a row) or when the order broke.
//
// After the bookmark the relist commits at its resourceVersion, and the
// same connection goes on as the watch (stateWatch.open): a relist costs
// one request. What a streaming list costs: every object in full, once,
// from the watch cache (or etcd when it is off); a paginated relist reads
// metadata pages and full pages only where something changed (list.go), so
// it moves fewer bytes when little changed, but reads from etcd page by
// page. Which one runs, and the fallback when a server refuses streaming
// lists: listmode.go.

import (
	"context"
	"errors"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"github.com/watchjournal/watchjournal/internal/loopmetrics"
	"github.com/watchjournal/watchjournal/journal"
)

// initialEventsEnd is the annotation of the bookmark that ends a
// streaming list's initial events (metav1.InitialEventsAnnotationKey).
const initialEventsEnd = "k8s.io/initial-events-end"

// errNoStreaming is returned when the server refused a streaming list or
// showed that it does not serve one; the loop then lists in pages.
type errNoStreaming struct{ err error }

// Error says why.
func (e errNoStreaming) Error() string { return e.err.Error() }

// Unwrap returns the server's answer.
func (e errNoStreaming) Unwrap() error { return e.err }

// streamList runs one complete streaming list, diffs it against the index
// and commits the difference, then watches on, on the same connection.
func (l *Loop) streamList(ctx context.Context, s stateList) (state, error) {
	for restarts := 0; ; restarts++ {
		start := l.opts.Clock.Now()
		rv, staged, first, last, st, err := l.streamOnce(ctx, s)
		var refused errNoStreaming
		switch {
		case ctx.Err() != nil:
			if je, ok := err.(journalError); ok && !errors.Is(je.err, journal.ErrNoSpace) {
				return nil, fmt.Errorf("%w: %w", ErrJournal, je.err)
			}
			return s, nil
		case errors.As(err, &refused):
			l.fallBack(refused.err)
			return l.pagedList(ctx, s)
		case isRestart(err, true):
			l.log.Info("streaming list: initial events not in key order: listing again with lookups")
			s.unordered = true
			restarts--
			continue
		case isGone(err):
			l.update(func(x *Status) { x.ListRestarts++ })
			if restarts+1 >= maxListRestarts {
				return l.fail(s, fmt.Errorf("%w: streaming list: 410 %d times in a row: %w", ErrList, restarts+1, err))
			}
			l.log.Info("streaming list answered 410: starting it again", "error", err)
			continue
		case err != nil:
			if je, ok := err.(journalError); ok {
				if errors.Is(je.err, journal.ErrNoSpace) {
					return l.fail(s, fmt.Errorf("%w: %w", ErrJournal, je.err))
				}
				return nil, fmt.Errorf("%w: %w", ErrJournal, je.err)
			}
			return l.fail(s, fmt.Errorf("%w: streaming list: %w", ErrList, err))
		}
		l.streamed()
		l.listed(s, start, rv, staged, first, last)
		return stateWatch{rv: rv, goneOrigin: journal.OriginRelist, open: st, fromList: true}, nil
	}
}

// isRestart reports whether err asks to start the list again with lookups
// (unordered) or not.
func isRestart(err error, unordered bool) bool {
	r, ok := err.(errRestart)
	return ok && r.unordered == unordered
}

// streamOnce runs one streaming list: it stages the diff of its initial
// events and commits it at the bookmark's resourceVersion. It returns that
// resourceVersion, the number of events committed and their offsets, and
// the stream, open, past its initial events.
func (l *Loop) streamOnce(ctx context.Context, s stateList) (rv string, n int, first, last uint64, _ *stream, err error) {
	rel, err := l.w.BeginRelist()
	if err != nil {
		return "", 0, 0, 0, nil, journalError{err}
	}
	committed := false
	var pipe stagePipe // stagepipe.go
	defer func() {
		if !committed {
			_ = pipe.wait()
			_ = rel.Abort()
		}
	}()
	l.staging = loopmetrics.TypeCounts{}
	if err = l.readPending(); err != nil { // shard.go
		return "", 0, 0, 0, nil, journalError{err}
	}
	l.update(func(x *Status) { x.listBegins() })

	st, pr, err := l.c.watchList(ctx, l.watchTimeout(), l.timeouts())
	if err != nil {
		if isRejected(err) {
			return "", 0, 0, 0, nil, errNoStreaming{err}
		}
		return "", 0, 0, 0, nil, err
	}
	// Protobuf objects are decoded only where they become events
	// (wire.go); the watch that follows decodes every one.
	st.lazy = true
	defer func() {
		if !committed {
			st.close()
		}
	}()

	cf := l.newConfirmer()
	defer cf.done()
	var batch []Item
	held, counted := 0, int64(0)
	lastKey := ""
	flush := func() error {
		if len(batch) == 0 {
			return nil
		}
		var evs []journal.Event
		var err error
		if !s.unordered {
			if !sortedAfter(lastKey, batch) {
				return errRestart{unordered: true}
			}
			evs, err = l.diffRange(lastKey, batch)
		} else {
			if err := pipe.wait(); err != nil {
				return err
			}
			evs, err = l.diffLookup(rel, batch)
		}
		if err != nil {
			return journalError{err}
		}
		if err := fillObjects(evs, batch); err != nil {
			return fmt.Errorf("%w: %w", ErrDecode, err)
		}
		if err := cf.reasonsNow(ctx, evs); err != nil {
			return err
		}
		evs = l.prepareStage(s.origin, evs)
		if err := pipe.stage(rel, evs); err != nil {
			return err
		}
		if !s.unordered {
			lastKey = batch[len(batch)-1].Key
		}
		size := st.frames.total - counted
		counted = st.frames.total
		l.update(func(x *Status) { x.listPage(len(batch), size) })
		clear(batch)
		batch, held = batch[:0], 0
		return nil
	}
	for frames := 0; ; frames++ {
		ev, err := st.next()
		switch {
		case err != nil && frames == 0 && errors.Is(err, ErrNoProgress):
			return "", 0, 0, 0, nil, l.silentStream(ctx, err)
		case err != nil:
			return "", 0, 0, 0, nil, fmt.Errorf("stream broke before its initial events ended: %w", err)
		}
		switch ev.Type {
		case "ADDED":
			var it Item
			if ev.proto != nil {
				it, err = protoItem(*ev.proto)
			} else {
				it, err = l.c.item(ev.Object, "", "")
			}
			if err != nil {
				return "", 0, 0, 0, nil, fmt.Errorf("%w: %w", ErrDecode, err)
			}
			if !l.c.shard.in(it.UID) {
				continue // another shard's key (shard.go)
			}
			batch = append(batch, it)
			held += len(it.Object) + len(it.proto)
			if len(batch) >= int(l.opts.PageSize) || held >= fillBytes {
				if err := flush(); err != nil {
					return "", 0, 0, 0, nil, err
				}
			}
		case "BOOKMARK":
			rv, end := bookmarkEnd(ev.Object)
			if !end {
				return "", 0, 0, 0, nil, errNoStreaming{errors.New("reconcile: the apiserver sent a bookmark without " + initialEventsEnd + " before its initial events: it ignores sendInitialEvents")}
			}
			if err := flush(); err != nil {
				return "", 0, 0, 0, nil, err
			}
			if err := pipe.wait(); err != nil {
				return "", 0, 0, 0, nil, err
			}
			// Keys indexed but not streamed: deleted while we were away.
			if err := l.tail(ctx, rel, s, lastKey, rv, cf); err != nil {
				return "", 0, 0, 0, nil, err
			}
			if n, first, last, err = l.commitList(rel, rv); err != nil {
				return "", 0, 0, 0, nil, err
			}
			committed = true
			st.lazy = false
			l.update(func(x *Status) { x.Encoding = st.encoding() })
			// From here on the connection is the watch: a quiet watch
			// may pass no byte for long (IdleTimeout bounds it).
			pr.timeout = 0
			return rv, n, first, last, st, nil
		case "ERROR":
			status := decodeStatus(ev.Object)
			serr := &apierrors.StatusError{ErrStatus: *status}
			if isRejected(serr) {
				return "", 0, 0, 0, nil, errNoStreaming{serr}
			}
			return "", 0, 0, 0, nil, fmt.Errorf("ERROR event before the initial events ended: %w", serr)
		default:
			return "", 0, 0, 0, nil, errNoStreaming{fmt.Errorf("reconcile: the apiserver sent %s before its initial events ended: it ignores sendInitialEvents", ev.Type)}
		}
	}
}

// bookmarkEnd reads a BOOKMARK object: its resourceVersion, and whether
// it is annotated k8s.io/initial-events-end "true".
func bookmarkEnd(obj []byte) (rv string, end bool) {
	var m struct {
		Metadata struct {
			ResourceVersion string            `json:"resourceVersion"`
			Annotations     map[string]string `json:"annotations"`
		} `json:"metadata"`
	}
	if err := jsonUnmarshal(obj, &m); err != nil || m.Metadata.ResourceVersion == "" {
		return "", false
	}
	return m.Metadata.ResourceVersion, m.Metadata.Annotations[initialEventsEnd] == "true"
}
