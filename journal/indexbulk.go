package journal

// Index entries of a first list, put in key order.
//
// A first list's direct appends (relist.go) add keys to an empty index,
// in transactions of up to directChunk ADDEDs. Their objects arrive in
// key order, so the main index and the 'k' entries of every secondary
// index (indexes.go) fill their leaves in sequence; the 'v' entries do
// not: they are ordered by value first, and a value's keys are spread
// over the list. Put one by one, they land in scattered leaves, each a
// search from the root into a leaf bbolt reads into a node and holds on
// the heap until the commit. So a direct transaction gathers the entries
// of its ADDEDs (bulkIndexes.add) and puts them at its end, sorted by
// bucket and entry (bulkIndexes.put): a bulk load in order, the same
// entries as applyIndexes writes one by one.
//
// It relies on what direct mode guarantees: every key is new (the index
// was empty at BeginRelist and a list names each key once), so a key has
// no values to remove and its 'k' entry is absent; applyIndexes' read of
// the old values is skipped. The recorded names are checked (and the
// names no function is registered under dropped) once per transaction.

import (
	"bytes"
	"slices"

	"github.com/watchjournal/watchjournal/internal/storage"
)

// bulkEntry is one secondary index entry to put.
type bulkEntry struct {
	bucket string
	k, v   []byte
}

// bulkIndexes gathers the secondary index entries of one direct
// transaction. The zero value is ready; one per transaction.
type bulkIndexes struct {
	keep    []string // the recorded names with a function (kept), set once
	fns     map[string]*registration
	checked bool
	entries []bulkEntry
}

// add gathers the index entries of e, an ADDED of key, a key not in the
// index before e (see the top of the file).
func (b *bulkIndexes) add(j *Journal, tx storage.Tx, key []byte, e *Event) error {
	if !b.checked {
		keep, fns, err := j.keptIndexes(tx)
		if err != nil {
			return err
		}
		b.keep, b.fns, b.checked = keep, fns, true
	}
	if len(b.keep) == 0 || len(e.Object) == 0 {
		return nil
	}
	obj, err := j.seal.open(e.Key, e.Object)
	if err != nil {
		return err
	}
	for _, n := range b.keep {
		vals, err := callIndex(n, b.fns[n].fn, key, obj)
		if err != nil {
			return err
		}
		if vals, err = j.seal.hashValues(vals); err != nil {
			return err
		}
		if len(vals) == 0 {
			continue
		}
		bucket := indexBucket(n)
		for _, v := range vals {
			b.entries = append(b.entries, bulkEntry{bucket: bucket, k: append(valueEntry(v), key...), v: []byte{}})
		}
		b.entries = append(b.entries, bulkEntry{bucket: bucket, k: keyEntry(key), v: encodeValues(vals)})
	}
	return nil
}

// put writes the gathered entries in bucket and key order.
func (b *bulkIndexes) put(tx storage.Tx) error {
	slices.SortFunc(b.entries, func(x, y bulkEntry) int {
		if x.bucket != y.bucket {
			if x.bucket < y.bucket {
				return -1
			}
			return 1
		}
		return bytes.Compare(x.k, y.k)
	})
	for _, e := range b.entries {
		if err := tx.DerivedPut(e.bucket, e.k, e.v); err != nil {
			return err
		}
	}
	b.entries = b.entries[:0]
	return nil
}
