package journal

// A Reshard in chunks (shard.go has what a Reshard does).
//
// A group of 1,000,000 objects going from one member to two moves some
// 500,000 keys out of each file, which in one bbolt transaction would all
// sit in memory until the commit (as a relist commit's would: relist.go).
// So Reshard records a marker first, metaReshard: the
// recorded selector it starts from, the canonical selector it goes to, and
// the last index key examined. Each chunk, one transaction, reads the
// marker, scans the index on from that key for keys whose UID hash is in
// the part that leaves (from minus to), journals at most commitChunk of
// them as DELETED (reason moved) and removes them from the index, and
// moves the marker's key on, all together. The chunk that reaches the end
// of the index also records the new selector, the pending part and no
// resourceVersion when the range grew, and clears the marker.
//
// Everything a chunk needs is in the marker, read in the chunk's own
// transaction, so a crash between chunks rolls forward from exactly where
// the last committed chunk stopped. The keys of one chunk are held in
// memory, 100 bytes or so each.

import (
	"encoding/json"
	"errors"
	"fmt"

	"github.com/watchjournal/watchjournal/internal/hashrange"
	"github.com/watchjournal/watchjournal/internal/storage"
)

// metaReshard is the marker of a Reshard in progress (JSON, reshardMarker).
const metaReshard = "reshard"

// reshardMarker is what a Reshard in progress records.
type reshardMarker struct {
	// From is the selector the file recorded when the Reshard began.
	From string `json:"from"`
	// To is the canonical selector it goes to ("" unbinds).
	To string `json:"to"`
	// After is the last index key examined; nil before the first chunk.
	After []byte `json:"after,omitempty"`
}

func setReshardMarker(tx storage.Tx, m reshardMarker) error {
	b, err := json.Marshal(m)
	if err != nil {
		return err
	}
	return tx.SetMeta(metaReshard, b)
}

// reshardScan bounds the index keys one chunk examines, so that a chunk
// over a stretch of the index where few keys leave still ends soon.
const reshardScan = 64 * commitChunk

// finishReshard runs the Reshard whose marker the file holds to its end,
// and returns what its chunks did; with no marker it does nothing.
func (j *Journal) finishReshard() (ReshardResult, error) { return j.finishReshardChunks(-1) }

// finishReshardChunks is finishReshard running at most max chunks (all
// when max < 0): tests stop there to stand for a crash.
func (j *Journal) finishReshardChunks(max int) (ReshardResult, error) {
	var res ReshardResult
	_, err := j.chunks(max, j.hooks.afterReshardChunk, func(tx storage.Tx) (int, bool, error) {
		return reshardChunk(&Tx{tx: tx, j: j, seal: j.seal}, &res)
	})
	if err != nil {
		return ReshardResult{}, fmt.Errorf("journal: reshard: %w", err)
	}
	return res, nil
}

// reshardChunk runs one chunk of the Reshard whose marker t holds, adding
// what it did to res. done reports that the Reshard is over (or there was
// none).
func reshardChunk(t *Tx, res *ReshardResult) (moved int, done bool, err error) {
	b := t.tx.Meta(metaReshard)
	if b == nil {
		return 0, true, nil
	}
	var m reshardMarker
	var old, nw hashrange.Set
	err = json.Unmarshal(b, &m)
	if err == nil {
		old, err = hashrange.Selected(m.From)
	}
	if err == nil {
		nw, err = hashrange.Selected(m.To)
	}
	if err != nil {
		return 0, false, fmt.Errorf("%w: reshard marker: %v", ErrBadRecord, err)
	}
	var leaving []IndexEntry
	end, last := true, m.After
	if out := old.Minus(nw); !out.Empty() {
		scanned := 0
		err := t.tx.IndexScan(m.After, func(k, v []byte) (bool, error) {
			if len(leaving) == commitChunk || scanned == reshardScan {
				end = false
				return false, nil
			}
			scanned++
			last = append(last[:0:0], k...)
			e, err := decodeIndex(k, v)
			if err != nil {
				return false, err
			}
			if out.ContainsUID(e.UID) {
				leaving = append(leaving, e)
			}
			return true, nil
		})
		if err != nil {
			return 0, false, err
		}
	}
	for _, ie := range leaving {
		e := Event{Type: Deleted, Key: ie.Key, UID: ie.UID, ResourceVersion: ie.ResourceVersion, Origin: OriginRelist, Reason: ReasonMoved}
		off, err := t.Append(&e)
		if err != nil {
			return 0, false, err
		}
		if res.First == 0 {
			res.First = off
		}
		res.Last = off
	}
	res.Left += len(leaving)
	if !end {
		m.After = last
		return len(leaving), false, setReshardMarker(t.tx, m)
	}
	rec, err := recordedResource(t.tx, "Reshard")
	if err != nil {
		return 0, false, err
	}
	rec.ShardSelector = m.To
	if err := errors.Join(t.tx.SetMeta(metaResource, rec.encode()), t.tx.SetMeta(metaReshard, nil)); err != nil {
		return 0, false, err
	}
	entered := nw.Minus(old)
	if entered.Empty() {
		// What is pending and no longer in the range is no longer pending.
		return len(leaving), true, setPending(t.tx, pendingSet(t.tx).Intersect(nw))
	}
	res.Entered = entered.Selector()
	if err := setPending(t.tx, pendingSet(t.tx).Union(entered)); err != nil {
		return 0, false, err
	}
	return len(leaving), true, t.tx.SetMeta(metaRV, nil)
}
