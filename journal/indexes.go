package journal

// Secondary indexes: named index functions over the stored objects, kept on
// disk in the same transaction as the object they derive from.
//
// Design. A process registers index functions on a writable journal
// (Indexes.Add) before its writer starts, as client-go's
// AddIndexers before an informer runs, and brings the file current with
// them (Indexes.Reindex, reindex.go), beside the writer. Each function maps an object's
// bytes (as stored: JSON or protobuf as served, or the metadata a
// metadata-only journal keeps) to index values. Every write that changes a key's object
// — the writer's append (tx.go) of an ADDED, MODIFIED or DELETED, a relist's commit (its
// tombstones included) and a first list's direct appends — calls every
// registered function on the new object, in the write transaction, and
// updates the bucket idx/<name> there: the index and the object commit or
// roll back together, so a reader (ObjectView.Lookup, Indexes.Lookup) sees
// both of one commit. The cost is paid by the writer, once per change: one
// call of each function (a decode, for jcache) and a few bucket writes.
// An event without an object (a DELETED, or an ADDED or MODIFIED that
// carries none) removes the key from every index.
//
// Bucket idx/<name> holds two kinds of entries:
//
//	'v' uvarint(len(value)) value key → empty   one per (value, key): a lookup is a prefix scan
//	'k' key → values (uvarint(len) bytes)…      the key's current values, to remove them on change
//
// The length prefix keeps any value (a "/" or a NUL included) apart from
// the key that follows it. In a file that seals its objects, a value is
// stored as its keyed hash (HMAC-SHA256, sealfile.go), never in
// plaintext, and a lookup hashes the value it is given.
//
// Names recorded, and reindexed at every registration. Go functions cannot
// be fingerprinted, so the file records the names of the indexes it keeps
// (meta "indexes") and cannot know whether the function registered under
// a name today is the one its entries were computed with (a program's
// next version may change it, or the transform its objects pass
// through). So every registration (Indexes.Add) marks its names pending
// (meta "indexesPending"), and Reindex brings a pending index
// current: it reads the live keys in bounded batches, each in a read
// transaction of its own, calls the registered function on each object
// outside any transaction, and rewrites only the keys whose stored values
// differ, in one short write transaction per batch; the last transaction
// clears the mark. A name the file does not record is recorded, with an
// empty bucket, by Indexes.Add: its build is the same reindex, every
// key with values differing from none.
//
// Invariant: a name that is recorded and not pending has, for every live
// key, the values its registered function gives the key's object. While a
// name is pending, lookups in it (Indexes.Lookup, ObjectView.Lookup,
// Indexes.Values) fail with ErrIndexPending, which matches ErrNoIndex: the
// reader evaluates the function itself (jcache's read-time path), so a
// read never gets a stale or partial answer. It holds because the
// function is registered in Indexes.Add's transaction, before the
// reindex starts: every write from then on indexes with it, and a
// batch rewrites a key only when the key's index entry is the one it
// read (a write in between has indexed the key already). A crash during
// the reindex leaves the name pending; the next registration
// reindexes again.
//
// A write made while a recorded name is not registered (a process that
// did not, or not yet, register it) drops that index and its record in
// the same transaction, since the write would leave it stale; registering
// it later builds it again. An index function's error fails the write (as
// client-go's store, which panics on one): the transaction is rolled back
// whole and the error matches ErrIndexFunc.

import (
	"encoding/binary"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync/atomic"

	"github.com/watchjournal/watchjournal/internal/storage"
)

// IndexFunc computes the index values of one stored object: obj is the
// object's bytes as the file stores them (Event.Object: JSON or Kubernetes
// protobuf as served, ObjectJSON converts; the metadata, for a
// metadata-only journal, in JSON), valid only during the call. It is called by the
// writer, once per change of the key, inside the write transaction: it must
// not use the journal. Duplicate values count once; nil means none.
type IndexFunc func(obj []byte) ([]string, error)

// ErrNoIndex: the file keeps no index of that name (never registered, or
// dropped by a write made while it was not registered).
var ErrNoIndex = errors.New("journal: no such index")

// ErrIndexPending matches ErrNoIndex: the index is registered but not yet
// reindexed against its function (Indexes.Add, then Reindex), so the
// file cannot answer for it; evaluate the function instead.
var ErrIndexPending = fmt.Errorf("%w: its reindex against the registered function is not finished", ErrNoIndex)

// ErrIndexFunc matches the error of a write whose index function failed;
// the write's transaction was rolled back.
var ErrIndexFunc = errors.New("journal: index function failed")

// metaIndexes records the names of the indexes the file keeps, sorted,
// separated by newlines; metaIndexesPending, in the same form, those of
// them not reindexed against their function yet.
const (
	metaIndexes        = "indexes"
	metaIndexesPending = "indexesPending"
)

// registration is one Indexes.Add of a name: its address tells a
// reindex whether the name was registered again since it began.
type registration struct{ fn IndexFunc }

// indexSet is the index functions registered on a Journal in this
// process, replaced whole by Indexes.Add.
type indexSet struct {
	atomic.Pointer[map[string]*registration]
}

func (s *indexSet) get() map[string]*registration {
	if p := s.Load(); p != nil {
		return *p
	}
	return nil
}

// indexBucket is the derived bucket of index name.
func indexBucket(name string) string { return "idx/" + name }

func checkIndexName(name string) error {
	if name == "" || strings.ContainsAny(name, "\n\x00") {
		return fmt.Errorf("journal: index name %q is empty or holds a newline or NUL", name)
	}
	return nil
}

func recordedIndexes(tx storage.Tx) []string { return nameList(tx, metaIndexes) }

func pendingIndexes(tx storage.Tx) []string { return nameList(tx, metaIndexesPending) }

func setRecordedIndexes(tx storage.Tx, names []string) error {
	return setNameList(tx, metaIndexes, names)
}

func setPendingIndexes(tx storage.Tx, names []string) error {
	return setNameList(tx, metaIndexesPending, names)
}

func nameList(tx storage.Tx, meta string) []string {
	v := tx.Meta(meta)
	if len(v) == 0 {
		return nil
	}
	return strings.Split(string(v), "\n")
}

// setNameList stores names sorted and distinct; none deletes the entry.
func setNameList(tx storage.Tx, meta string, names []string) error {
	if len(names) == 0 {
		return tx.SetMeta(meta, nil)
	}
	slices.Sort(names)
	return tx.SetMeta(meta, []byte(strings.Join(slices.Compact(names), "\n")))
}

// answering returns ErrNoIndex when the file does not record name, and
// ErrIndexPending while it is not reindexed.
func answering(tx storage.Tx, name string) error {
	if !slices.Contains(recordedIndexes(tx), name) {
		return fmt.Errorf("%w: %q", ErrNoIndex, name)
	}
	if slices.Contains(pendingIndexes(tx), name) {
		return fmt.Errorf("%w: %q", ErrIndexPending, name)
	}
	return nil
}

// Indexes is a journal's secondary indexes: register index functions
// (Add), build or check their entries (Reindex), and look keys up by an
// indexed value. Get it from Journal.Indexes; it is safe for concurrent
// use.
type Indexes struct{ j *Journal }

// Indexes returns j's secondary indexes.
func (j *Journal) Indexes() Indexes { return Indexes{j: j} }

// Add registers index functions by name on a writable journal, for
// this process, and makes the file keep their indexes from this
// transaction on: every later write indexes its object with them. Each
// name is marked pending in the file, and lookups in it fail with
// ErrIndexPending until Reindex has checked the stored entries
// against the function (a name the file does not record starts empty:
// the reindex builds it). Registering a name this Journal already
// has replaces its function, pending again. It is one short write
// transaction; call it before the writer starts (a write made while a
// recorded name is not registered drops the index). Errors: ErrReadOnly,
// a bad name, the store's.
func (in Indexes) Add(add map[string]IndexFunc) error {
	j := in.j
	for name, fn := range add {
		if err := checkIndexName(name); err != nil {
			return err
		}
		if fn == nil {
			return fmt.Errorf("journal: index %q has a nil function", name)
		}
	}
	if j.store.ReadOnly() {
		return fmt.Errorf("%w: add indexes to %s", ErrReadOnly, j.Path())
	}
	var prev map[string]*registration
	err := j.store.Update(func(tx storage.Tx) error {
		recorded, pending := recordedIndexes(tx), pendingIndexes(tx)
		prev = j.ix.get()
		next := maps.Clone(prev)
		if next == nil {
			next = map[string]*registration{}
		}
		for name, fn := range add {
			if !slices.Contains(recorded, name) {
				if err := tx.DropDerived(indexBucket(name)); err != nil {
					return err
				}
				recorded = append(recorded, name)
			}
			pending = append(pending, name)
			next[name] = &registration{fn: fn}
		}
		if err := setRecordedIndexes(tx, recorded); err != nil {
			return err
		}
		if err := setPendingIndexes(tx, pending); err != nil {
			return err
		}
		// Registered inside the transaction: the next write transaction
		// begins after this one ends, and sees the functions.
		j.ix.Store(&next)
		return nil
	})
	if err != nil {
		j.ix.Store(&prev)
		return fmt.Errorf("journal: add indexes: %w", err)
	}
	return nil
}

func callIndex(name string, fn IndexFunc, key, obj []byte) ([]string, error) {
	vals, err := fn(obj)
	if err != nil {
		return nil, fmt.Errorf("%w: index %q, key %q: %w", ErrIndexFunc, name, key, err)
	}
	vals = slices.Clone(vals) // sorted here: never the function's own slice
	slices.Sort(vals)
	return slices.Compact(vals), nil
}

// applyIndexes updates the file's indexes for e, just applied to the
// index at e.Offset, in the same transaction; key is e.Key's bytes. A
// recorded index whose function is not registered is dropped (see the
// design above); a registered name the file does not record is not kept.
func (j *Journal) applyIndexes(tx storage.Tx, key []byte, e *Event) error {
	if j == nil { // a Tx built by hand in a test
		return nil
	}
	recorded := recordedIndexes(tx)
	if len(recorded) == 0 {
		return nil
	}
	fns := j.ix.get()
	keep := recorded[:0:0]
	for _, n := range recorded {
		if _, ok := fns[n]; ok {
			keep = append(keep, n)
		} else if err := tx.DropDerived(indexBucket(n)); err != nil {
			return err
		}
	}
	if len(keep) < len(recorded) {
		if err := setRecordedIndexes(tx, slices.Clone(keep)); err != nil {
			return err
		}
		pending := slices.DeleteFunc(pendingIndexes(tx), func(n string) bool { return !slices.Contains(keep, n) })
		if err := setPendingIndexes(tx, pending); err != nil {
			return err
		}
	}
	obj := e.Object
	if e.Type != Deleted && len(obj) > 0 {
		// A staged relist event carries its object as the stage file holds
		// it, sealed where the journal seals (seal.go): index the plaintext.
		var err error
		if obj, err = j.seal.open(e.Key, obj); err != nil {
			return err
		}
	}
	for _, n := range keep {
		var vals []string
		if e.Type != Deleted && len(obj) > 0 {
			var err error
			if vals, err = callIndex(n, fns[n].fn, key, obj); err != nil {
				return err
			}
			if vals, err = j.seal.hashValues(vals); err != nil {
				return err
			}
		}
		if err := setIndexValues(tx, indexBucket(n), key, vals); err != nil {
			return err
		}
	}
	return nil
}

// valueEntry is the 'v' entry prefix of value; the entry is it plus the key.
func valueEntry(value string) []byte {
	b := make([]byte, 0, 1+binary.MaxVarintLen64+len(value))
	b = append(b, 'v')
	b = binary.AppendUvarint(b, uint64(len(value)))
	return append(b, value...)
}

func keyEntry(key []byte) []byte { return append([]byte{'k'}, key...) }

func encodeValues(vals []string) []byte {
	var b []byte
	for _, v := range vals {
		b = binary.AppendUvarint(b, uint64(len(v)))
		b = append(b, v...)
	}
	return b
}

func decodeValues(b []byte) ([]string, error) {
	var out []string
	for len(b) > 0 {
		n, w := binary.Uvarint(b)
		if w <= 0 || uint64(len(b)-w) < n {
			return nil, fmt.Errorf("%w: index values entry", ErrBadRecord)
		}
		out = append(out, string(b[w:w+int(n)]))
		b = b[w+int(n):]
	}
	return out, nil
}

// setIndexValues makes vals (sorted, distinct) key's values in bucket.
func setIndexValues(tx storage.Tx, bucket string, key []byte, vals []string) error {
	old, err := decodeValues(tx.DerivedGet(bucket, keyEntry(key)))
	if err != nil {
		return err
	}
	if slices.Equal(old, vals) {
		return nil
	}
	for _, v := range old {
		if !slices.Contains(vals, v) {
			if err := tx.DerivedDelete(bucket, append(valueEntry(v), key...)); err != nil {
				return err
			}
		}
	}
	for _, v := range vals {
		if !slices.Contains(old, v) {
			if err := tx.DerivedPut(bucket, append(valueEntry(v), key...), []byte{}); err != nil {
				return err
			}
		}
	}
	if len(vals) == 0 {
		return tx.DerivedDelete(bucket, keyEntry(key))
	}
	return tx.DerivedPut(bucket, keyEntry(key), encodeValues(vals))
}

// indexKeys calls fn with every key whose values in index name include
// value, in key order; s gives the value's stored form (hashed in a sealed
// file: sealfile.go).
func indexKeys(tx storage.Tx, s *sealer, name, value string, fn func(key string) (bool, error)) error {
	if err := answering(tx, name); err != nil {
		return err
	}
	stored, err := s.lookupValue(tx, value)
	if err != nil {
		return err
	}
	prefix := valueEntry(stored)
	return tx.DerivedScan(indexBucket(name), prefix, func(k, _ []byte) (bool, error) {
		return fn(string(k[len(prefix):]))
	})
}

// Names returns the names of the indexes the file keeps, sorted: those
// registered (Indexes.Add) and not dropped since, pending ones included.
func (in Indexes) Names() ([]string, error) {
	j := in.j
	var out []string
	err := j.store.View(func(tx storage.Tx) error { out = recordedIndexes(tx); return nil })
	return out, err
}

// Lookup returns the keys whose values in index name include value,
// in key order, in one read transaction. Errors: ErrNoIndex (and
// ErrIndexPending, which matches it), the store's.
func (in Indexes) Lookup(name, value string) ([]string, error) {
	j := in.j
	var out []string
	err := j.store.View(func(tx storage.Tx) error {
		return indexKeys(tx, j.seal, name, value, func(k string) (bool, error) { out = append(out, k); return true, nil })
	})
	return out, err
}

// Lookup calls fn with every live key whose values in index name include
// value, in key order, and its stored object (as Get gives it), until fn
// returns false or an error: keys and objects of one commit. Errors:
// ErrNoIndex (and ErrIndexPending, which matches it), Get's, fn's.
func (v *ObjectView) Lookup(name, value string, fn func(key string, obj []byte) (bool, error)) error {
	return indexKeys(v.tx, v.seal, name, value, func(k string) (bool, error) {
		obj, ok, err := v.Get(k)
		if err != nil {
			return false, err
		}
		if !ok {
			return false, fmt.Errorf("%w: index %q holds %q, which is not live", ErrBadRecord, name, k)
		}
		return fn(k, obj)
	})
}

// parseValueEntry splits a 'v' entry into its value and key.
func parseValueEntry(k []byte) (value string, key []byte, ok bool) {
	if len(k) < 2 || k[0] != 'v' {
		return "", nil, false
	}
	n, w := binary.Uvarint(k[1:])
	if w <= 0 || uint64(len(k)-1-w) < n {
		return "", nil, false
	}
	return string(k[1+w : 1+w+int(n)]), k[1+w+int(n):], true
}

// Values returns the distinct values of index name, sorted by their
// stored form (length, then bytes), in one read transaction: a walk of the
// index's value entries, without a decode. Errors: ErrNoIndex (and
// ErrIndexPending, which matches it, also for a file whose values are
// stored hashed: Indexes.Hashed), the store's, ErrBadRecord for a damaged
// entry.
func (in Indexes) Values(name string) ([]string, error) {
	j := in.j
	var out []string
	err := j.store.View(func(tx storage.Tx) error {
		if err := answering(tx, name); err != nil {
			return err
		}
		if j.Indexes().Hashed() {
			return fmt.Errorf("%w: %q: the file's index values are stored hashed (sealfile.go)", ErrIndexPending, name)
		}
		return tx.DerivedScan(indexBucket(name), []byte{'v'}, func(k, _ []byte) (bool, error) {
			v, _, ok := parseValueEntry(k)
			if !ok {
				return false, fmt.Errorf("%w: index %q entry %q", ErrBadRecord, name, k)
			}
			if len(out) == 0 || out[len(out)-1] != v {
				out = append(out, v)
			}
			return true, nil
		})
	})
	return out, err
}

// checkIndexes reports, for every index the file records, a value entry
// of a key that is not live or whose values do not hold it, and a key's
// value without its value entry (the file check; the values themselves
// cannot be recomputed offline: the functions are the program's).
func checkIndexes(tx storage.Tx, problem func(format string, args ...any)) error {
	for _, name := range recordedIndexes(tx) {
		b := indexBucket(name)
		err := tx.DerivedScan(b, []byte{'v'}, func(k, _ []byte) (bool, error) {
			v, key, ok := parseValueEntry(k)
			if !ok {
				problem("index %s: damaged value entry %q", name, k)
				return true, nil
			}
			if tx.IndexGet(key) == nil {
				problem("index %s: value %q holds %s, which is not live", name, v, key)
			}
			vals, err := decodeValues(tx.DerivedGet(b, keyEntry(key)))
			if err != nil || !slices.Contains(vals, v) {
				problem("index %s: value %q holds %s, whose values are %q", name, v, key, vals)
			}
			return true, nil
		})
		if err != nil {
			return err
		}
		err = tx.DerivedScan(b, []byte{'k'}, func(k, val []byte) (bool, error) {
			vals, err := decodeValues(val)
			if err != nil {
				problem("index %s: %s: %v", name, k[1:], err)
				return true, nil
			}
			for _, v := range vals {
				if tx.DerivedGet(b, append(valueEntry(v), k[1:]...)) == nil {
					problem("index %s: %s has value %q without its value entry", name, k[1:], v)
				}
			}
			return true, nil
		})
		if err != nil {
			return err
		}
	}
	return nil
}
