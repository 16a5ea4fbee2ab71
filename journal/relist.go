package journal

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"os"

	"github.com/watchjournal/watchjournal/internal/storage"
)

// commitChunk and commitBytes bound one transaction of a relist commit:
// it moves at most commitChunk staged events, and stops after the one that
// takes it past commitBytes of records. bbolt holds every page a
// transaction dirties in memory until it commits, so this bounds the
// writer's memory (with objects of 900 KiB, 1,000 records would be 900
// MB); it does not change what is committed. The count matters when the
// changes are scattered over the index: each MODIFIED of a relist with 1%
// changed lands in its own index leaf, and bbolt reads every leaf it
// writes into nodes on the heap, so a transaction's heap grows with the
// scattered events it holds; commitChunk bounds that heap, and the commits
// it adds are what BenchmarkRelistStaged measures (BENCHMARKS.md §10).
// The initial list, in key order, fills its leaves in sequence either way.
const (
	commitChunk = 250
	commitBytes = 4 << 20
)

// directChunk bounds one transaction of a first list's direct appends
// (below), with commitBytes. A first list mostly comes in key order, so a
// transaction fills the index's leaves in sequence; the secondary indexes'
// value entries (indexes.go), and the keys of a streaming list that broke
// key order, land in scattered leaves, which bbolt holds on the heap until
// the commit (commitChunk's note). What a transaction costs on disk is
// mostly fixed (two fdatasyncs, the meta page, the freelist), so fewer,
// larger transactions suit a first list: at commitChunk a streaming batch
// of 500 would take two commits, and the stream's reader would wait for
// their syncs. The reconcile loop hands over, in one Stage, the batches
// read while the last Stage was written (reconcile/stagepipe.go, at most
// 2,000 events), so that one call is one transaction.
const directChunk = 2000

// Relist stages the events a relist infers, on disk, until the list is
// complete; Writer.BeginRelist starts one. Nothing staged is visible in the index or the journal before
// Commit; Abort, an error, or a crash discards it all. Memory stays bounded
// by what one call passes in. Not safe for concurrent use; one Relist at a
// time per Journal.
//
// The events wait in a sibling file, <path>.relist (see stagefile.go for
// why not in the journal file); it exists only while a relist with changes
// is in progress.
//
// The first list into an empty index is the exception (direct mode): it
// only adds keys, so each Stage call goes straight into the journal and
// the index (until a call holds an event other than ADDED: from there on
// it stages as above), in transactions of at most directChunk events or
// commitBytes, the first of which clears the stored resourceVersion.
// Those ADDEDs are visible before Commit, and Abort or a crash keeps them;
// with no resourceVersion the next run lists again and diffs against
// them, so nothing is lost or duplicated. It writes every object once
// instead of twice (stage file, then journal).
type Relist struct {
	j      *Journal
	w      *stageWriter // nil until the first event is staged
	staged int
	done   bool

	// direct: the index was empty at BeginRelist (see above); first is
	// the offset of the first event it appended, 0 before it.
	direct bool
	first  uint64
}

// BeginRelist starts a relist. It first finishes a commit that an earlier
// Relist began and could not complete (a full disk, say), and discards
// whatever an unfinished relist staged.
func (w *Writer) BeginRelist() (*Relist, error) {
	j := w.j
	if err := j.finishRelist(); err != nil {
		return nil, err
	}
	direct := false
	if err := j.store.Update(func(tx storage.Tx) error {
		direct = tx.IndexCount() == 0
		return tx.SeenClear()
	}); err != nil {
		return nil, fmt.Errorf("journal: begin relist: %w", err)
	}
	return &Relist{j: j, direct: direct}, nil
}

// Stage appends evs to the staging file, in order; in direct mode (a
// first list into an empty index, all ADDEDs: see Relist) it commits them
// to the journal and the index instead, and sets their Offset. Their
// Offset is otherwise ignored; a zero Time is set now. A full disk gives
// an error matching ErrNoSpace.
func (r *Relist) Stage(evs []Event) error {
	if r.done {
		return fmt.Errorf("journal: relist already finished")
	}
	for i := 0; r.direct && i < len(evs); i++ {
		if evs[i].Type != Added {
			r.direct = false // from here on, staged as any relist
		}
	}
	for i := range evs {
		if err := checkKey("key", evs[i].Key); err != nil {
			return fmt.Errorf("journal: stage: %w", err)
		}
		if err := checkReason(evs[i].Type, evs[i].Reason); err != nil {
			return fmt.Errorf("journal: stage: %w", err)
		}
		if evs[i].Time.IsZero() {
			evs[i].Time = r.j.now()
		}
		evs[i].PrevOffset = 0 // set when the event is moved into the journal
		if r.direct {
			continue
		}
		rec, err := r.j.seal.encode(&evs[i]) // seal.go: the stage file holds no plaintext either
		if err != nil {
			return fmt.Errorf("journal: stage: %w", err)
		}
		if r.w == nil {
			if r.w, err = createStage(stagePath(r.j.Path())); err != nil {
				return err
			}
		}
		if err := r.w.add(rec); err != nil {
			return err
		}
		r.staged++
	}
	if r.direct {
		return r.appendDirect(evs)
	}
	return nil
}

// appendDirect is Stage in direct mode (see relist).
func (r *Relist) appendDirect(evs []Event) error {
	for len(evs) > 0 {
		var n int
		var first uint64
		err := r.j.store.Update(func(tx storage.Tx) error {
			n, first = 0, 0
			var bulk bulkIndexes // the secondary indexes, put in key order at the end (indexbulk.go)
			if r.first == 0 {
				if err := tx.SetMeta(metaRV, nil); err != nil {
					return err
				}
			}
			for written := 0; n < len(evs) && n < directChunk && written < commitBytes; n++ {
				e := &evs[n]
				if _, err := r.j.stamp(tx, e); err != nil {
					return err
				}
				e.PrevOffset = 0 // an ADDED
				rec, err := r.j.seal.encode(e)
				if err != nil {
					return err
				}
				if err := r.j.putDirect(tx, []byte(e.Key), e, rec, &bulk); err != nil {
					return err
				}
				if first == 0 {
					first = e.Offset
				}
				written += len(rec)
			}
			return bulk.put(tx)
		})
		if err != nil {
			return fmt.Errorf("journal: stage: %w", err)
		}
		if r.first == 0 {
			r.first = first
		}
		r.staged += n
		evs = evs[n:]
		r.j.wake()
		if r.j.hooks.afterDirectChunk != nil {
			r.j.hooks.afterDirectChunk()
		}
	}
	return nil
}

// Staged returns how many events have been staged.
func (r *Relist) Staged() int { return r.staged }

// MarkSeen records keys as listed, for a relist whose pages did not come in
// key order and so must find deletions by lookup (Unseen).
func (r *Relist) MarkSeen(keys []string) error {
	for _, k := range keys {
		if err := checkKey("key", k); err != nil {
			return fmt.Errorf("journal: mark seen: %w", err)
		}
	}
	return r.j.store.Update(func(tx storage.Tx) error {
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
	err := r.j.store.View(func(tx storage.Tx) error {
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
// Large relists commit in chunks (250 events or 4 MiB); a marker written first
// (after the staging file is fsynced) makes a crash in between roll
// forward on the next Open or BeginRelist, so the relist is never lost nor
// half-applied once the marker is set. It returns the first and last
// offsets assigned (0, 0 when nothing was staged). A chunk that finds the
// marker changed since the previous one (another writer moved the commit
// on) stops it with a *stageMarkerError.
func (r *Relist) Commit(rv string) (first, last uint64, err error) {
	if r.done {
		return 0, 0, fmt.Errorf("journal: relist already finished")
	}
	r.done = true
	if r.w == nil {
		err := r.j.store.Update(func(tx storage.Tx) error {
			return errors.Join(tx.SeenClear(), tx.SetMeta(metaRV, []byte(rv)))
		})
		if err != nil {
			return 0, 0, fmt.Errorf("journal: commit relist: %w", err)
		}
		if r.first != 0 {
			head, err := r.j.Head()
			return r.first, head, err
		}
		return 0, 0, nil
	}
	if first, err = r.mark(rv); err != nil {
		return 0, 0, err
	}
	if r.first != 0 {
		first = r.first
	}
	if err := r.j.finishRelist(); err != nil {
		return 0, 0, err
	}
	head, err := r.j.Head()
	return first, head, err
}

// mark makes the staged events durable and sets the commit marker; from
// here on the relist rolls forward. It returns the first offset.
func (r *Relist) mark(rv string) (first uint64, err error) {
	path := stagePath(r.j.Path())
	if err := r.w.finish(r.j.noSync); err != nil {
		r.w.discard(path)
		return 0, err
	}
	_ = r.w.f.Close()
	if err := r.j.store.Update(func(tx storage.Tx) error {
		first = tx.NextOffset()
		return errors.Join(tx.SetMeta(metaRelistStage, encodeStageMeta(r.w.nonce, r.w.size, stageHeader)),
			tx.SetMeta(metaRelistRV, []byte(rv)))
	}); err != nil {
		_ = os.Remove(path)
		return 0, fmt.Errorf("journal: commit relist: %w", err)
	}
	return first, nil
}

// Abort discards what was staged. A relist whose Commit failed after its
// marker was set is not aborted: the next BeginRelist or Open finishes it.
func (r *Relist) Abort() error {
	if r.done {
		return nil
	}
	r.done = true
	if r.w != nil {
		r.w.discard(stagePath(r.j.Path()))
	}
	return nil
}

func encodeStageMeta(nonce uint64, size, pos int64) []byte {
	b := make([]byte, 24)
	binary.BigEndian.PutUint64(b, nonce)
	binary.BigEndian.PutUint64(b[8:], uint64(size))
	binary.BigEndian.PutUint64(b[16:], uint64(pos))
	return b
}

func decodeStageMeta(b []byte) (nonce uint64, size, pos int64, ok bool) {
	if len(b) != 24 {
		return 0, 0, 0, false
	}
	return binary.BigEndian.Uint64(b), int64(binary.BigEndian.Uint64(b[8:])), int64(binary.BigEndian.Uint64(b[16:])), true
}

// finishRelist moves staged events into the journal while the commit marker
// is set, commitChunk per transaction with the stage file's position
// (checkStageMarker first), then sets the resourceVersion and clears the
// marker. Without a marker it only removes a stage file a crash left.
func (j *Journal) finishRelist() error { return j.finishRelistChunks(-1) }

// finishRelistChunks is finishRelist moving at most max chunks (all when
// max < 0): tests stop there to stand for a crash.
func (j *Journal) finishRelistChunks(max int) error {
	path := stagePath(j.Path())
	var rv, st []byte
	if err := j.store.View(func(tx storage.Tx) error {
		rv = bytes.Clone(tx.Meta(metaRelistRV))
		st = bytes.Clone(tx.Meta(metaRelistStage))
		return nil
	}); err != nil {
		return fmt.Errorf("journal: commit relist: %w", err)
	}
	if rv == nil {
		if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
			return stageErr(err)
		}
		return nil
	}
	nonce, size, pos, ok := decodeStageMeta(st)
	if !ok {
		return j.forgetRelist(fmt.Errorf("%w: the commit marker has no stage record", errStageLost))
	}
	sr, err := openStage(path, nonce, size, pos)
	if errors.Is(err, errStageLost) {
		return j.forgetRelist(err)
	}
	if err != nil {
		return stageErr(err)
	}
	defer sr.close()
	var bad error
	done, err := j.chunks(max, j.hooks.afterRelistChunk, func(tx storage.Tx) (moved int, done bool, err error) {
		at, written := sr.pos, 0
		if err := checkStageMarker(tx, path, rv, nonce, size, at); err != nil {
			return 0, false, err
		}
		for moved < commitChunk && written < commitBytes && at < size {
			rec, next, err := sr.next()
			if err != nil {
				bad = err
				return 0, false, err
			}
			e, err := decodeEvent(0, rec)
			if err == nil {
				err = checkKey("key", e.Key)
			}
			if err != nil {
				bad = err
				return 0, false, err
			}
			staged := e.PrevOffset // Stage writes 0
			raised, err := j.stamp(tx, &e)
			if err != nil {
				return 0, false, err
			}
			iv := tx.IndexGet([]byte(e.Key))
			setPrevOffset(&e, iv)
			if obj := lastObject(tx, []byte(e.Key), iv, &e); obj != nil {
				// A tombstone, stored with the key's last object
				// (objects.go), sealed where the journal seals.
				e.Object = obj
				if rec, err = j.seal.encode(&e); err != nil {
					return 0, false, err
				}
			} else if raised || e.PrevOffset != staged {
				if rec, err = encodeEvent(&e); err != nil {
					return 0, false, err
				}
			}
			if err := j.put(tx, []byte(e.Key), &e, rec); err != nil {
				return 0, false, err
			}
			at = next
			moved++
			written += len(rec)
		}
		if at < size {
			return moved, false, tx.SetMeta(metaRelistStage, encodeStageMeta(nonce, size, at))
		}
		return moved, true, errors.Join(tx.SetMeta(metaRelistStage, nil), tx.SetMeta(metaRelistRV, nil),
			tx.SeenClear(), tx.SetMeta(metaRV, rv))
	})
	if bad != nil {
		return j.forgetRelist(bad)
	}
	if err != nil {
		return fmt.Errorf("journal: commit relist: %w", err)
	}
	if done {
		sr.close()
		_ = os.Remove(path)
	}
	return nil
}

// chunks runs chunk, one write transaction each, until it reports done or
// max chunks have run (all when max < 0), and reports whether it reached
// done. Followers wake after a chunk that moved events; after, when set,
// runs after each chunk but the last.
func (j *Journal) chunks(max int, after func(), chunk func(storage.Tx) (moved int, done bool, err error)) (bool, error) {
	for ; max != 0; max-- {
		var moved int
		var done bool
		err := j.store.Update(func(tx storage.Tx) (err error) {
			moved, done, err = chunk(tx)
			return err
		})
		if err != nil {
			return false, err
		}
		if moved > 0 {
			j.wake()
		}
		if done {
			return true, nil
		}
		if after != nil {
			after()
		}
	}
	return false, nil
}

// checkStageMarker returns a *stageMarkerError unless the commit marker in
// tx is the one the chunk about to move continues from: the relist's
// resourceVersion rv, the stage file's nonce and size, and the position at.
func checkStageMarker(tx storage.Tx, path string, rv []byte, nonce uint64, size, at int64) error {
	gotRV, st := tx.Meta(metaRelistRV), tx.Meta(metaRelistStage)
	n, sz, pos, ok := decodeStageMeta(st)
	if ok && n == nonce && sz == size && pos == at && string(gotRV) == string(rv) {
		return nil
	}
	e := &stageMarkerError{Path: path, Nonce: nonce, Pos: at, Present: gotRV != nil}
	if ok {
		e.FoundNonce, e.FoundPos = n, pos
	}
	return e
}

// forgetRelist gives up a commit whose stage file cannot be read (cause):
// it clears the marker and the resourceVersion, so that the next run lists
// again and its diff against the index emits what the lost relist would
// have. Chunks already moved stay: each was a consistent transaction.
func (j *Journal) forgetRelist(cause error) error {
	j.log.Error(cause, "a relist's stage file cannot be read; the resourceVersion is cleared so that the next run relists",
		"file", stagePath(j.Path()))
	err := j.store.Update(func(tx storage.Tx) error {
		return errors.Join(tx.SetMeta(metaRelistStage, nil), tx.SetMeta(metaRelistRV, nil), tx.SetMeta(metaRV, nil), tx.SeenClear())
	})
	if err != nil {
		return fmt.Errorf("journal: commit relist: %w", err)
	}
	_ = os.Remove(stagePath(j.Path()))
	return nil
}
