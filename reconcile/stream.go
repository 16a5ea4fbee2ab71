package reconcile

// The streaming lister (KEP-3157; the request: client.watchList; the
// choice and the fallback: listmode.go; what a failure leads to:
// listFailed, list.go). The relist consumer stages one batch while the
// next is read (stagepipe.go): memory stays bounded by two batches. After
// the bookmark, handover gives the same connection to the watch
// (stateWatch.open): a relist costs one request. A paginated relist moves
// fewer bytes when little changed, but reads from etcd page by page
// (pages.go).

import (
	"context"
	"errors"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
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

// streamLister reads a streaming list: its initial events, in batches of
// PageSize objects or fillBytes, up to the bookmark that ends them. The
// connection stays open past the bookmark, for the watch (handover); close
// ends it otherwise.
type streamLister struct {
	l  *Loop
	st *stream
	pr *progressReader
}

// each opens the streaming list and hands its initial events over.
func (sl *streamLister) each(ctx context.Context, fn func(batch) error) (string, error) {
	l := sl.l
	st, pr, err := l.c.watchList(ctx, l.watchTimeout(), l.timeouts())
	if err != nil {
		if isRejected(err) {
			return "", errNoStreaming{err}
		}
		return "", err
	}
	sl.st, sl.pr = st, pr

	counted := int64(0) // bytes of the frames counted as pages
	b := &batcher{max: int(l.opts.PageSize), fn: func(bt batch) error {
		if err := fn(bt); err != nil {
			return err
		}
		size := st.frames.total - counted
		counted = st.frames.total
		l.update(func(x *Status) { x.listPage(len(bt.items), size) })
		return nil
	}}
	for frames := 0; ; frames++ {
		ev, err := st.next()
		switch {
		case err != nil && frames == 0 && errors.Is(err, ErrNoProgress):
			return "", l.silentStream(ctx, err)
		case err != nil:
			return "", fmt.Errorf("stream broke before its initial events ended: %w", err)
		}
		switch ev.Type {
		case "ADDED":
			it, err := l.c.eventItem(ev)
			if err != nil {
				return "", fmt.Errorf("%w: %w", ErrDecode, err)
			}
			if !l.c.shard.in(it.UID) {
				continue // another shard's key (shard.go)
			}
			if err := b.add(it); err != nil {
				return "", err
			}
		case "BOOKMARK":
			rv, end := bookmarkEnd(ev.Object)
			if !end {
				return "", errNoStreaming{errors.New("reconcile: the apiserver sent a bookmark without " + initialEventsEnd + " before its initial events: it ignores sendInitialEvents")}
			}
			return rv, b.flush()
		case "ERROR":
			serr := &apierrors.StatusError{ErrStatus: *decodeStatus(ev.Object)}
			if isRejected(serr) {
				return "", errNoStreaming{serr}
			}
			return "", fmt.Errorf("ERROR event before the initial events ended: %w", serr)
		default:
			return "", errNoStreaming{fmt.Errorf("reconcile: the apiserver sent %s before its initial events ended: it ignores sendInitialEvents", ev.Type)}
		}
	}
}

// handover returns the stream, past its initial events, as the watch's
// connection (stateWatch.open), once the list committed.
func (sl *streamLister) handover() *stream {
	st := sl.st
	sl.st = nil
	sl.l.update(func(x *Status) { x.Encoding = st.encoding() })
	// From here on the connection is the watch: a quiet watch may pass no
	// byte for long (IdleTimeout bounds it).
	sl.pr.timeout = 0
	return st
}

// close ends the stream unless it was handed over.
func (sl *streamLister) close() {
	if sl.st != nil {
		sl.st.close()
	}
}

// bookmarkEnd reads a BOOKMARK object: its resourceVersion, and whether
// it is annotated k8s.io/initial-events-end "true".
func bookmarkEnd(obj []byte) (rv string, end bool) {
	var m metav1.PartialObjectMetadata
	if err := jsonAPI.Unmarshal(obj, &m); err != nil || m.ResourceVersion == "" {
		return "", false
	}
	return m.ResourceVersion, m.Annotations[initialEventsEnd] == "true"
}
