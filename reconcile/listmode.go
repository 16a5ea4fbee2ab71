package reconcile

// Which list the loop runs: streaming or paginated, chosen per server and
// remembered per file.
//
// A list, initial or relist, is a streaming list (stream.go) unless
// Options.ListMode asks for pages, or the server refused one. A refusal is
// an answer that says the server does not serve streaming lists for this
// resource, never a failure that may pass:
//
//   - 400, 405, 406 or 422 to the streaming list request, or as the Status
//     of an ERROR event before its initial events ended (kube-apiserver
//     v1.37 with --feature-gates=WatchList=false answers 422 Invalid
//     "sendInitialEvents is forbidden for watch unless the WatchList
//     feature gate is enabled"; an aggregated API may answer 400);
//   - a stream that shows the server ignored sendInitialEvents (servers
//     before v1.27): a BOOKMARK without the k8s.io/initial-events-end
//     annotation, or an event other than ADDED, before that bookmark; or
//     no frame at all within Options.ProgressTimeout after the answer
//     began, on a collection that a one-item list then shows empty (a
//     server that ignores sendInitialEvents serves a watch from now, which
//     on an empty collection sends nothing; one that serves streaming
//     lists sends its bookmark at once, and on a collection with objects
//     even the server that ignores it sends their ADDEDs, as a watch
//     without a resourceVersion does). A link that stalls just then on an
//     empty collection is taken for a refusal too: the cost is paginated
//     lists until StreamingRetry.
//
// A silence on a collection that holds objects, or a silence whose one-item
// list fails or times out too, is a stall, not a refusal: a conversion webhook
// that hangs (the apiserver cannot encode the first object), a slow etcd, a
// stalled link. The streaming list is retried after the backoff, as after any
// other failure.
//
// kube-apiserver v1.37 serves streaming lists with its watch cache off
// too (from etcd), so a cache that is off is no refusal.
//
// After a refusal the loop lists in pages (pages.go) and records the choice
// and its reason in the journal file's meta (entry "reconcile.listMode"),
// so that a restart does not ask again; it tries a streaming list again
// once Options.StreamingRetry has passed since the refusal (default 1 hour), as a server may
// be upgraded or its flags changed. Status.ListMode and ListModeReason say
// which runs and why. A 429, a 5xx, a 410, a network error or a cut
// stream is no refusal: the streaming list is retried, after the backoff
// where the loop backs off (a 429's Retry-After is a floor).

import (
	"context"
	"fmt"
	"time"
)

// ListMode names how the loop lists (Status.ListMode, Options.ListMode).
type ListMode string

// List modes.
const (
	// ListModeStreaming is a streaming list (KEP-3157): one watch request
	// with sendInitialEvents=true, whose connection goes on as the watch.
	ListModeStreaming ListMode = "streaming"
	// ListModePaginated is a paginated list (limit and continue), then a
	// watch from the list's resourceVersion.
	ListModePaginated ListMode = "paginated"
)

// DefaultStreamingRetry is the StreamingRetry of Options whose field is
// zero.
const DefaultStreamingRetry = time.Hour

// metaNamespace is the loop's namespace of the journal file's meta
// entries (journal.Writer.Meta).
const metaNamespace = "reconcile"

// listModeMeta is the meta entry that remembers a refusal: in the file,
// "reconcile.listMode".
const listModeMeta = "listMode"

// listModeRecord is the value of listModeMeta, in JSON.
type listModeRecord struct {
	Mode   ListMode `json:"mode"`
	Reason string   `json:"reason"`
	// At is when the server refused.
	At time.Time `json:"at"`
}

// loadListMode sets the loop's list mode from Options.ListMode and the
// file's record of a refusal.
func (l *Loop) loadListMode() {
	mode, reason := ListModeStreaming, "not tried yet"
	switch {
	case l.opts.ListMode == ListModePaginated:
		mode, reason = ListModePaginated, "Options.ListMode"
	default:
		var rec listModeRecord
		b, err := l.w.Meta(metaNamespace).Get(listModeMeta)
		if err == nil && b != nil {
			err = jsonAPI.Unmarshal(b, &rec)
		}
		if err == nil && rec.Mode == ListModePaginated {
			mode, reason, l.refusedAt = ListModePaginated, rec.Reason, rec.At
		}
	}
	l.update(func(x *Status) { x.ListMode, x.ListModeReason = mode, reason })
}

// streaming reports whether the next list streams: unless Options ask for
// pages, or a refusal was recorded less than StreamingRetry ago.
func (l *Loop) streaming() bool {
	if l.opts.ListMode == ListModePaginated {
		return false
	}
	st := l.Status()
	return st.ListMode != ListModePaginated || !l.opts.Clock.Now().Before(l.refusedAt.Add(l.opts.StreamingRetry))
}

// fallBack records that the server refused a streaming list (err says
// how): lists are paginated until StreamingRetry has passed.
func (l *Loop) fallBack(err error) {
	reason := err.Error()
	l.refusedAt = l.opts.Clock.Now()
	l.update(func(x *Status) { x.ListMode, x.ListModeReason = ListModePaginated, reason })
	l.log.Info("the apiserver does not serve streaming lists for this resource: listing in pages",
		"reason", reason, "retryAt", l.refusedAt.Add(l.opts.StreamingRetry))
	l.saveListMode(&listModeRecord{Mode: ListModePaginated, Reason: reason, At: l.refusedAt})
}

// streamed records a streaming list that completed.
func (l *Loop) streamed() {
	st := l.Status()
	if st.ListMode == ListModeStreaming && st.ListModeReason == servedReason {
		return
	}
	if st.ListMode == ListModePaginated {
		l.log.Info("the apiserver serves streaming lists again")
		l.saveListMode(nil)
	}
	l.update(func(x *Status) { x.ListMode, x.ListModeReason = ListModeStreaming, servedReason })
}

// servedReason is Status.ListModeReason once a streaming list completed.
const servedReason = "the apiserver serves streaming lists"

// saveListMode writes rec to the file's meta (nil deletes it). The record
// only saves a request at the next start: a failure to write it is logged.
func (l *Loop) saveListMode(rec *listModeRecord) {
	var b []byte
	if rec != nil {
		var err error
		if b, err = jsonAPI.Marshal(rec); err != nil {
			l.log.Error(err, "cannot encode the list mode record")
			return
		}
	}
	if err := l.w.Meta(metaNamespace).Put(listModeMeta, b); err != nil {
		l.log.Error(fmt.Errorf("%w: %w", ErrJournal, err), "cannot record the list mode in the journal file")
	}
}

// silentStream classifies a streaming list that sent no frame within
// ProgressTimeout (err, ErrNoProgress): an errNoStreaming when a one-item
// list shows the collection empty, so that the silence is what a server
// that ignores sendInitialEvents sends; otherwise a stall, err itself,
// which the loop retries as a streaming list after the backoff (see the
// top of this file).
func (l *Loop) silentStream(ctx context.Context, err error) error {
	p, lerr := l.listOne(ctx, "")
	switch {
	case lerr != nil:
		return fmt.Errorf("no initial event nor bookmark within ProgressTimeout, and a one-item list failed too (%v): a stall, not a refusal: %w", lerr, err)
	case len(p.Items) > 0:
		return fmt.Errorf("no initial event nor bookmark within ProgressTimeout though the collection holds objects (a hung conversion webhook, a slow etcd, a stalled link): a stall, not a refusal: %w", err)
	}
	return errNoStreaming{fmt.Errorf("reconcile: no initial event nor bookmark within ProgressTimeout on an empty collection: the apiserver ignores sendInitialEvents, or the link stalled: %w", err)}
}
