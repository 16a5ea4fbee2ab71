package adapt

import (
	"context"
	"fmt"

	"k8s.io/client-go/tools/cache"

	"github.com/watchjournal/watchjournal/journal"
)

// DeleteReasonHandler is a cache.ResourceEventHandler that wants the
// journal.Reason of each DELETED: Handle calls OnDeleteWithReason in place
// of OnDelete, with the same obj (the final object, or a
// cache.DeletedFinalStateUnknown) and the reason. A reason of
// journal.ReasonLeftSelector or journal.ReasonMoved means the object still
// exists on the server and is not to be acted on as a deletion; see
// journal.Reason for each value.
type DeleteReasonHandler interface {
	cache.ResourceEventHandler
	OnDeleteWithReason(obj any, reason journal.Reason)
}

// Handle feeds the consumer's events to h, in the shape an informer feeds a
// cache.ResourceEventHandler, and commits after each batch has been handled,
// until ctx is done (then it returns nil, as controller-runtime's Start and
// reconcile.Loop.Run do on a clean shutdown) or reading, decoding or
// committing fails (then that error). Delivery is at-least-once: events
// handled but not committed when the process dies are handled again.
// Handlers run on the calling goroutine, one at a time.
//
// Objects decode from the file alone: a DELETED inferred by a relist is
// labelled with the kind and apiVersion the file records
// (journal.TypeMeta), so a fresh process whose first event is such a
// tombstone delivers it with a typed decoder too.
//
//   - ADDED: OnAdd(obj, false). There is no initial-list phase to report: a
//     consumer starts from its committed offset.
//   - MODIFIED: OnUpdate(old, new), where old is the object as it was
//     before the change (labels, annotations, spec, data: what a "did it
//     change" filter compares), read from the key's previous event in the
//     journal (old.go: one read of the record at journal.Event.PrevOffset,
//     no memory kept per key; in a metadata-only journal, the previous
//     metadata). When that event is no longer retained (retention trimmed
//     it) or the MODIFIED was written before records carried PrevOffset (a
//     schema 2 or older file), old is metadata-only: name, namespace, UID
//     and the previous resourceVersion, no labels, annotations or data.
//   - DELETED seen live: OnDelete(obj) with the final object.
//   - DELETED inferred by a relist: OnDelete(cache.DeletedFinalStateUnknown{
//     Key, Obj}), as an informer does; Obj is the key's last stored object
//     in a file that keeps objects (journal.Event.Object), else
//     metadata-only.
//   - a DELETED whose journal.Reason is left-selector or moved (the object
//     still exists, out of the journal's scope) is delivered as above, as
//     an informer delivers an object leaving its selector; a handler that
//     implements DeleteReasonHandler gets every DELETED through
//     OnDeleteWithReason instead, with the reason.
func Handle(ctx context.Context, c *journal.Consumer, h cache.ResourceEventHandler, opts *Options) error {
	o := opts.withDefaults()
	dec := &decoder{decode: o.Decode, j: c.Journal()}
	for {
		evs, err := c.Next(ctx, o.Batch)
		if ctx.Err() != nil {
			return nil
		}
		if err != nil {
			return err
		}
		for _, e := range evs {
			obj, err := dec.object(e)
			if err != nil {
				return fmt.Errorf("adapt: offset %d: decode: %w", e.Offset, err)
			}
			switch e.Type {
			case journal.Added:
				h.OnAdd(obj, false)
			case journal.Modified:
				old, err := oldObject(dec, c.Journal(), e)
				if err != nil {
					return fmt.Errorf("adapt: offset %d: old object: %w", e.Offset, err)
				}
				h.OnUpdate(old, obj)
			case journal.Deleted:
				var del any = obj
				if e.Synthesized() {
					del = cache.DeletedFinalStateUnknown{Key: e.Key, Obj: obj}
				}
				if rh, ok := h.(DeleteReasonHandler); ok {
					rh.OnDeleteWithReason(del, e.Reason)
				} else {
					h.OnDelete(del)
				}
			}
		}
		if err := c.Commit(evs[len(evs)-1].Offset); err != nil {
			return err
		}
	}
}
