package journal

// A file bound to a shard range (Resource.ShardSelector) holds
// only the keys whose UID hashes into the range (FNV-1a, KEP-5866; package
// internal/hashrange). Open refuses another range (ErrResourceMismatch), as
// it refuses another selector; the range changes only through Reshard,
// which a shard group's member calls when its share of the hash space
// changes:
//
//   - keys whose UID hash leaves the range are journaled DELETED, reason
//     moved (ReasonMoved), at once (in chunks: reshard.go): this journal
//     knows they moved, since it changed its own range;
//   - when the range grows, the part that enters is recorded as pending
//     (ShardPending) and the stored resourceVersion is cleared, so the next
//     loop lists (reconcile: it lists at the new range and journals the keys
//     that entered as ADDED, reason moved). A crash before that list commits leaves both,
//     so the list still runs after the restart. The member clears the
//     pending part (ClearShardPending) once the list has committed.

import (
	"fmt"

	"github.com/watchjournal/watchjournal/internal/hashrange"
	"github.com/watchjournal/watchjournal/internal/storage"
)

// metaShardPending records the ranges a Reshard added whose keys no list
// has journaled yet, as a selector.
const metaShardPending = "shardPending"

// canonicalShard returns a shard selector in canonical form ("" stays "").
func canonicalShard(s string) (string, error) {
	if s == "" {
		return "", nil
	}
	set, err := hashrange.Parse(s)
	if err != nil {
		return "", fmt.Errorf("%w: shard selector: %v", errInvalidSelector, err)
	}
	return set.Selector(), nil
}

// shardSummary describes a shard selector in a few words: its share of the
// hash space and its number of ranges.
func shardSummary(s string) string {
	set, err := hashrange.Parse(s)
	if err != nil {
		return "(invalid)"
	}
	return fmt.Sprintf("%.1f%%/%d-ranges", 100*set.Share(), len(set))
}

// Reshard binds the file to the shard selector sel (KEP-5866 syntax;
// "" unbinds: the whole space): every indexed key whose UID hash is
// outside sel is journaled DELETED (reason moved, origin relist, no
// object: a tombstone) and leaves the index; the file records sel; and
// when sel holds hashes the old range did not, that part is recorded as
// pending (ShardPending, merged with any already pending) and the stored
// resourceVersion is cleared, so that the next reconcile loop lists
// instead of resuming. The caller stops the loop that writes the file
// first and starts a new one after (reconcile.New reads the range from
// the file).
//
// It runs in transactions of at most commitChunk DELETEDs, so a range of
// any size moves in bounded memory; a crash in between rolls forward on
// the next writable Open (or Reshard): no key is journaled twice or lost
// (reshard.go). Until then the file still records the old range, with
// some of the keys that leave already gone.
//
// Errors: one matching hashrange.ErrSyntax for sel, ErrReadOnly, a file
// that records no resource, or the store's.
func (w *Writer) Reshard(sel string) (ReshardResult, error) {
	nw, err := hashrange.Selected(sel)
	if err != nil {
		return ReshardResult{}, err
	}
	canon := ""
	if sel != "" {
		canon = nw.Selector()
	}
	// What a crash or a full disk left unfinished goes first, in the order
	// Open finishes them: a relist commit (its events were inferred at the
	// old range), then a Reshard.
	if err := w.j.finishRelist(); err != nil {
		return ReshardResult{}, err
	}
	if _, err := w.j.finishReshard(); err != nil {
		return ReshardResult{}, err
	}
	err = w.j.store.Update(func(tx storage.Tx) error {
		rec, err := recordedResource(tx, "Reshard")
		if err != nil {
			return err
		}
		if _, err := hashrange.Selected(rec.ShardSelector); err != nil {
			return fmt.Errorf("%w: recorded shard selector: %v", ErrBadRecord, err)
		}
		return setReshardMarker(tx, reshardMarker{From: rec.ShardSelector, To: canon})
	})
	if err != nil {
		return ReshardResult{}, fmt.Errorf("journal: reshard: %w", err)
	}
	return w.j.finishReshard()
}

func pendingSet(tx storage.Tx) hashrange.Set {
	b := tx.Meta(metaShardPending)
	if len(b) == 0 {
		return nil
	}
	s, err := hashrange.Parse(string(b))
	if err != nil {
		return nil
	}
	return s
}

func setPending(tx storage.Tx, s hashrange.Set) error {
	if s.Empty() {
		return tx.SetMeta(metaShardPending, nil)
	}
	return tx.SetMeta(metaShardPending, []byte(s.Selector()))
}

// ShardPending returns the hash ranges a Reshard added whose keys no
// list has journaled yet, as a canonical KEP-5866 shard selector ("" when
// none): package reconcile journals the ADDED of a list for keys in them
// as moved.
func (w *Writer) ShardPending() (string, error) {
	var s hashrange.Set
	err := w.j.store.View(func(tx storage.Tx) error { s = pendingSet(tx); return nil })
	if err != nil {
		return "", fmt.Errorf("journal: shard pending: %w", err)
	}
	if s.Empty() {
		return "", nil
	}
	return s.Selector(), nil
}

// MarkShardPending adds the ranges of the shard selector sel (KEP-5866
// syntax; "" adds nothing) to the pending ranges (ShardPending) of a file
// bound to a shard range: the next list's ADDED for keys that hash into
// them are journaled as moved in. A shard member calls it when it joins a
// group with an empty file whose range others held. Errors: sel's, as
// Reshard's, or the store's.
func (w *Writer) MarkShardPending(sel string) error {
	if sel == "" {
		return nil
	}
	s, err := hashrange.Parse(sel)
	if err != nil {
		return fmt.Errorf("journal: mark shard pending: %w", err)
	}
	return w.j.store.Update(func(tx storage.Tx) error { return setPending(tx, pendingSet(tx).Union(s)) })
}

// ClearShardPending forgets the pending ranges (ShardPending), once a list
// at the new range has committed.
func (w *Writer) ClearShardPending() error {
	return w.j.store.Update(func(tx storage.Tx) error { return setPending(tx, nil) })
}
