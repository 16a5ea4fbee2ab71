package journal

// Reindexing against the functions registered now (see
// indexes.go, "Names recorded, and reindexed at every registration").
//
// Design. Reindex walks the live keys in key order, one batch at a
// time: a read transaction copies at most ReindexBatch keys (or readBytes
// of objects) with their index entry, object and stored values; the
// registered functions run on the copies outside any transaction, so a
// slow function holds neither the writer nor the store's memory map; a
// write transaction then rewrites the keys whose values differ, each only
// if its index entry is still the one read (else a write indexed it with
// the same function in between). A batch with nothing to rewrite takes no
// write transaction, so reindexing an unchanged index costs the writer
// nothing but the final transaction that clears the pending mark. The
// writer waits at most for one batch's rewrite, never for a pass over
// the file.

import (
	"bytes"
	"context"
	"fmt"
	"slices"

	"github.com/watchjournal/watchjournal/internal/storage"
)

// ReindexBatch is the most keys Reindex reads in one read
// transaction, and so rewrites in one write transaction.
const ReindexBatch = 512

// ReindexStats is what one Reindex did.
type ReindexStats struct {
	// Keys is the number of live keys read (each once, whatever the
	// number of names).
	Keys int
	// Rewritten is the number of (key, index) pairs whose stored values
	// differed from the function's and were rewritten; 0 when the index
	// was current.
	Rewritten int
	// Transactions is the number of write transactions that rewrote
	// keys; the one that clears the pending mark is not counted.
	Transactions int
	// MaxRewrite is the most pairs rewritten in one write transaction;
	// at most ReindexBatch times the number of names.
	MaxRewrite int
}

// reindexKey is a key read by a batch: its index entry and object (copies)
// and its stored values per name.
type reindexKey struct {
	key   string
	entry []byte
	obj   []byte // nil: no object (no values)
	old   [][]string
}

// rewrite is one key's new values in one index.
type rewrite struct {
	name  string
	key   []byte
	entry []byte
	vals  []string
}

// Reindex brings the pending indexes names (registered in this process by
// Indexes.Add) current with their functions, in bounded batches
// (see the top of the file), then clears their pending mark: lookups in
// them answer from then on. It runs beside the writer and returns when
// done or when ctx is done (ctx.Err(); the names stay pending). A name
// that is not pending is reindexed all the same. Errors: ErrReadOnly, one
// naming an unregistered name, ErrIndexFunc (the names stay pending),
// an error when a name is registered again while it runs (the later
// registration's reindex takes over), the store's.
func (in Indexes) Reindex(ctx context.Context, names []string) (ReindexStats, error) {
	j := in.j
	var st ReindexStats
	if j.store.ReadOnly() {
		return st, fmt.Errorf("%w: reindex of %s", ErrReadOnly, j.Path())
	}
	names = slices.Clone(names)
	slices.Sort(names)
	names = slices.Compact(names)
	regs := make([]*registration, len(names))
	all := j.ix.get()
	for i, n := range names {
		if regs[i] = all[n]; regs[i] == nil {
			return st, fmt.Errorf("journal: reindex index %q: not registered by AddIndexes", n)
		}
	}
	if len(names) == 0 {
		return st, nil
	}
	var after []byte
	for {
		if err := ctx.Err(); err != nil {
			return st, err
		}
		batch, err := j.readReindexBatch(after, names)
		if err != nil {
			return st, fmt.Errorf("journal: reindex: %w", err)
		}
		st.Keys += len(batch)
		var rw []rewrite
		for _, k := range batch {
			for i, n := range names {
				var vals []string
				if k.obj != nil {
					if vals, err = callIndex(n, regs[i].fn, []byte(k.key), k.obj); err != nil {
						return st, fmt.Errorf("journal: reindex: %w", err)
					}
					if vals, err = j.seal.hashValues(vals); err != nil {
						return st, fmt.Errorf("journal: reindex: %w", err)
					}
				}
				if !slices.Equal(vals, k.old[i]) {
					rw = append(rw, rewrite{name: n, key: []byte(k.key), entry: k.entry, vals: vals})
				}
			}
		}
		if len(rw) > 0 {
			n, err := j.rewriteIndexes(names, regs, rw)
			if err != nil {
				return st, fmt.Errorf("journal: reindex: %w", err)
			}
			st.Rewritten += n
			st.Transactions++
			st.MaxRewrite = max(st.MaxRewrite, n)
		}
		if len(batch) < ReindexBatch && !batchFull(batch) {
			break
		}
		after = []byte(batch[len(batch)-1].key)
	}
	err := j.store.Update(func(tx storage.Tx) error {
		if err := stillRegistered(j, names, regs); err != nil {
			return err
		}
		pending := slices.DeleteFunc(pendingIndexes(tx), func(n string) bool { return slices.Contains(names, n) })
		return setPendingIndexes(tx, pending)
	})
	if err != nil {
		return st, fmt.Errorf("journal: reindex: %w", err)
	}
	return st, nil
}

// batchFull reports whether a batch stopped on its bytes bound.
func batchFull(batch []reindexKey) bool {
	size := 0
	for _, k := range batch {
		size += len(k.obj)
	}
	return size >= readBytes
}

// readReindexBatch copies up to ReindexBatch live keys after after (or
// readBytes of objects), with their index entry, object (opened, when
// sealed) and stored values in each index of names, in one read
// transaction.
func (j *Journal) readReindexBatch(after []byte, names []string) ([]reindexKey, error) {
	var out []reindexKey
	err := j.store.View(func(tx storage.Tx) error {
		out = out[:0]
		size := 0
		return tx.IndexScan(after, func(k, iv []byte) (bool, error) {
			obj, err := objectAt(tx, k, iv)
			if err != nil {
				return false, err
			}
			if obj == nil {
				obj = tx.ObjectGet(k)
			}
			key := string(k)
			if obj != nil {
				if obj, err = j.seal.open(key, obj); err != nil {
					return false, err
				}
				obj = bytes.Clone(obj)
			}
			vk := reindexKey{key: key, entry: bytes.Clone(iv), obj: obj, old: make([][]string, len(names))}
			for i, n := range names {
				if vk.old[i], err = decodeValues(tx.DerivedGet(indexBucket(n), keyEntry(k))); err != nil {
					return false, err
				}
			}
			out = append(out, vk)
			size += len(obj)
			return len(out) < ReindexBatch && size < readBytes, nil
		})
	})
	return out, err
}

// rewriteIndexes applies rw in one write transaction, skipping a key
// whose index entry changed since it was read (the write that changed it
// indexed it with the same functions), and returns how many it applied.
func (j *Journal) rewriteIndexes(names []string, regs []*registration, rw []rewrite) (int, error) {
	n := 0
	err := j.store.Update(func(tx storage.Tx) error {
		n = 0
		if err := stillRegistered(j, names, regs); err != nil {
			return err
		}
		for _, r := range rw {
			if !bytes.Equal(tx.IndexGet(r.key), r.entry) {
				continue
			}
			if err := setIndexValues(tx, indexBucket(r.name), r.key, r.vals); err != nil {
				return err
			}
			n++
		}
		return nil
	})
	return n, err
}

// stillRegistered fails when a name of names has been registered again
// (or the registrations replaced) since regs were taken.
func stillRegistered(j *Journal, names []string, regs []*registration) error {
	all := j.ix.get()
	for i, n := range names {
		if all[n] != regs[i] {
			return fmt.Errorf("index %q was registered again during its reindex", n)
		}
	}
	return nil
}
