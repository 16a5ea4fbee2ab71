package journal

import (
	"fmt"

	"github.com/watchjournal/watchjournal/journal/bolt"
)

// commitChunk is how many staged events one transaction of a relist commit
// moves into the journal: it bounds the writer's memory, not correctness.
const commitChunk = 1000

// Relist stages the events a relist infers, on disk, until the list is
// complete. Nothing staged is visible in the index or the journal before
// Commit; Abort, an error, or a crash discards it all. Memory stays bounded
// by what one call passes in. Not safe for concurrent use; one Relist at a
// time per Journal.
type Relist struct {
	j      *Journal
	staged int
	done   bool
}

// BeginRelist starts a relist, discarding whatever an earlier, unfinished
// relist staged.
func (j *Journal) BeginRelist() (*Relist, error) {
	if err := j.store.Update(func(tx *bolt.Tx) error { return tx.StageClear() }); err != nil {
		return nil, fmt.Errorf("journal: begin relist: %w", err)
	}
	return &Relist{j: j}, nil
}

// Stage writes evs to the staging area in one transaction, in order. Their
// Offset is ignored; a zero Time is set now.
func (r *Relist) Stage(evs []Event) error {
	if len(evs) == 0 {
		return nil
	}
	err := r.j.store.Update(func(tx *bolt.Tx) error {
		for i := range evs {
			if evs[i].Time.IsZero() {
				evs[i].Time = now()
			}
			rec, err := encodeEvent(&evs[i])
			if err != nil {
				return err
			}
			if err := tx.StagePut(rec); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("journal: stage: %w", err)
	}
	r.staged += len(evs)
	return nil
}

// Staged returns how many events have been staged.
func (r *Relist) Staged() int { return r.staged }

// MarkSeen records keys as listed, for a relist whose pages did not come in
// key order and so must find deletions by lookup (Unseen).
func (r *Relist) MarkSeen(keys []string) error {
	return r.j.store.Update(func(tx *bolt.Tx) error {
		for _, k := range keys {
			if err := tx.SeenPut([]byte(k)); err != nil {
				return err
			}
		}
		return nil
	})
}

// Unseen returns the entries whose keys were not recorded by MarkSeen.
func (r *Relist) Unseen(entries []IndexEntry) ([]IndexEntry, error) {
	var out []IndexEntry
	err := r.j.store.View(func(tx *bolt.Tx) error {
		for _, e := range entries {
			if !tx.SeenHas([]byte(e.Key)) {
				out = append(out, e)
			}
		}
		return nil
	})
	return out, err
}

// Commit makes the staged events visible: each is appended to the journal
// and applied to the index, and rv becomes the last synced resourceVersion.
// Large relists commit in chunks; a marker written first makes a crash in
// between roll forward on the next Open, so the relist is never lost nor
// half-applied after Open returns. It returns the first and last offsets
// assigned (0, 0 when nothing was staged).
func (r *Relist) Commit(rv string) (first, last uint64, err error) {
	if r.done {
		return 0, 0, fmt.Errorf("journal: relist already finished")
	}
	r.done = true
	if err := r.j.store.Update(func(tx *bolt.Tx) error {
		first = tx.NextOffset()
		return tx.SetMeta(metaRelistRV, []byte(rv))
	}); err != nil {
		return 0, 0, fmt.Errorf("journal: commit relist: %w", err)
	}
	if err := r.j.finishRelist(); err != nil {
		return 0, 0, err
	}
	if r.staged == 0 {
		return 0, 0, nil
	}
	head, err := r.j.Head()
	return first, head, err
}

// Abort discards what was staged.
func (r *Relist) Abort() error {
	if r.done {
		return nil
	}
	r.done = true
	return r.j.store.Update(func(tx *bolt.Tx) error { return tx.StageClear() })
}

// finishRelist moves staged events into the journal while the commit marker
// is set, then sets the resourceVersion and clears the marker.
func (j *Journal) finishRelist() error {
	for {
		var finished bool
		var moved int
		err := j.store.Update(func(tx *bolt.Tx) error {
			rv := tx.Meta(metaRelistRV)
			if rv == nil {
				finished = true
				return nil
			}
			n, err := tx.StageTake(commitChunk, func(rec []byte) error {
				e, err := decodeEvent(0, rec)
				if err != nil {
					return err
				}
				enc := append([]byte(nil), rec...)
				off, err := tx.Append(enc)
				if err != nil {
					return err
				}
				e.Offset = off
				return applyIndex(tx, &e)
			})
			if err != nil {
				return err
			}
			moved = n
			if tx.StageEmpty() {
				if err := tx.SetMeta(metaRV, append([]byte(nil), rv...)); err != nil {
					return err
				}
				if err := tx.SetMeta(metaRelistRV, nil); err != nil {
					return err
				}
				finished = true
				return tx.StageClear()
			}
			return nil
		})
		if err != nil {
			return fmt.Errorf("journal: commit relist: %w", err)
		}
		if moved > 0 {
			j.wake()
		}
		if finished {
			return nil
		}
	}
}
