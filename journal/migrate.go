package journal

// Selector migration. A journal records one resource (Open refuses
// another: ErrResourceMismatch). When only the label or field selector
// changed, the index is still the right starting point: Open with
// Options.MigrateSelectors records the new selectors and forgets the
// stored resourceVersion, in one transaction, after finishing any relist
// or Reshard a crash interrupted (those belong to the old selectors). The
// writer's next start (package reconcile) then lists under the new
// selectors and commits the difference with the index, as after a 410:
// keys that match no more are journaled DELETED, with reason
// left-selector where the loop confirms by name that the object still
// exists (gone where it does not, unconfirmed beyond its lookups), and
// keys that match now are journaled ADDED. Consumers keep their offsets
// and read those events like any others.
//
// Only selectors migrate: another GVR, namespace, metadata-only choice or
// shard selector is another journal, and the error says to use a new path
// or remove the file.

import (
	"errors"
	"fmt"

	"github.com/watchjournal/watchjournal/internal/storage"
)

// onlySelectorsDiffer reports whether have and want are the same resource
// but for the label or field selector.
func onlySelectorsDiffer(have, want Resource) bool {
	a, b := have.identity(), want.identity()
	a.LabelSelector, a.FieldSelector = b.LabelSelector, b.FieldSelector
	return a.sameAs(b)
}

// mismatch returns Open's ErrResourceMismatch for have (recorded) and want,
// saying what to do next.
func mismatch(have, want Resource) error {
	if onlySelectorsDiffer(have, want) {
		return fmt.Errorf("%w: file has %q, asked for %q: only the selectors differ; "+
			"open with Options.MigrateSelectors to relist under the new selectors "+
			"(keys that leave them are journaled DELETED, reason left-selector), "+
			"or remove the file (or use a new path) to list afresh",
			ErrResourceMismatch, have, want)
	}
	return fmt.Errorf("%w: file has %q, asked for %q: a journal file holds one resource; "+
		"use a new path for this one, or remove the file (journalctl stats FILE shows what it records)",
		ErrResourceMismatch, have, want)
}

// migrateSelectors records r's selectors in place of the file's and
// forgets the stored resourceVersion (see the top of the file); nothing
// when the file records r already.
func (j *Journal) migrateSelectors(r *Resource) error {
	return j.store.Update(func(tx storage.Tx) error {
		have, ok, err := decodeResource(tx.Meta(metaResource))
		if err != nil || !ok || have.identity().sameAs(r.identity()) {
			return err
		}
		from := have.String()
		have.LabelSelector, have.FieldSelector = r.LabelSelector, r.FieldSelector
		if err := errors.Join(tx.SetMeta(metaResource, have.encode()), tx.SetMeta(metaRV, nil)); err != nil {
			return err
		}
		j.log.Info("selectors changed: the next start relists under the new ones", "from", from, "to", have.String())
		return nil
	})
}
