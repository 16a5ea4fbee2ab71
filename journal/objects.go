package journal

// Objects: the latest object of every live key, readable from the file.
//
// Design. The file keeps an objects bucket, key → the object bytes of the
// key's last ADDED or MODIFIED event (JSON as served; for a metadata-only
// journal the metadata that was stored). It changes in the same bbolt
// transaction as the index and the journal (applyIndex, for live appends
// and for a relist moved out of its stage file alike), so:
//
//   - retention trimming of the journal leaves it whole (it is not the
//     journal: a key's object survives its events being trimmed);
//   - a relist's MODIFIED or ADDED carries the listed object and replaces
//     the stored one; a tombstone (DELETED) removes it; an ADDED or
//     MODIFIED without an object removes it too, so a stale object is never
//     served as current;
//   - a restart reads it from the file as it was committed;
//   - a reader (ObjectView, one bbolt read transaction) sees the objects,
//     the index and the head of one commit: never uncommitted state, and
//     Head says which offset the read is current with.
//
// It is opt-in (Journal.KeepObjects; journal/cache's NewReader calls it),
// from the measured write cost: the object bytes are written a second
// time (once in the journal record, once here), and a bbolt put of ~1 KiB
// values over many keys dirties a leaf page per key per commit. On disk
// it costs the live objects' bytes plus bbolt's page overhead (~1.3–2×);
// per write one more B+tree put or delete in the open transaction, which
// cut the append rate of 1 KiB MODIFIEDs over 50,000 keys from ~60,000 to
// ~15,000–27,000 events/s and grew the file per event ~2.5× in
// bench.BenchmarkJournalAppend (batch=1000/nosync vs …/objects). The
// switch is the bucket's presence in the file: once on, it stays on
// across restarts, for every writer.
//
// A file that did not keep objects (older, or never switched on) opens
// unchanged. Switched on over a non-empty index, its keys fill as they
// change; until then a live key without an object reads as ErrNoObject
// and ObjectView.Missing lists those keys. A relist does not fill keys
// that did not change (it journals nothing for them): for a complete
// cache at once, switch it on before the first list (a new file).

import (
	"errors"
	"fmt"

	"github.com/watchjournal/watchjournal/journal/bolt"
)

// ErrObjectsNotKept: the file does not keep objects (KeepObjects was
// never called on it by a writer).
var ErrObjectsNotKept = errors.New("journal: the file does not keep objects (Journal.KeepObjects)")

// ErrNoObject matches a *NoObjectError: the key is live in the index but
// the file holds no object for it (objects were switched on over a
// non-empty index, and the key has not changed since).
var ErrNoObject = errors.New("journal: no object stored")

// NoObjectError names the live key that has no stored object.
type NoObjectError struct{ Key string }

func (e *NoObjectError) Error() string {
	return fmt.Sprintf("journal: no object stored for live key %q (unchanged since objects were first kept; it fills on the key's next change)", e.Key)
}

// Is makes errors.Is(err, ErrNoObject) true.
func (e *NoObjectError) Is(target error) bool { return target == ErrNoObject }

// applyObject keeps the objects bucket in step with the index for e.
func applyObject(tx *bolt.Tx, e *Event) error {
	if e.Type != Deleted && e.Object != nil {
		return tx.ObjectPut([]byte(e.Key), e.Object)
	}
	return tx.ObjectDelete([]byte(e.Key))
}

// ObjectView reads objects within one bbolt read transaction. It is valid
// only inside the function given to ViewObjects; the byte slices it gives
// are bbolt's memory-mapped pages, valid only until that function returns
// (copy or decode them there).
type ObjectView struct {
	tx   *bolt.Tx
	head uint64
}

// KeepObjects makes the file keep the latest object of every live key
// from now on (see objects.go for the cost), for this and every later
// writer. Call it before the first list for a complete cache. It is
// idempotent; on a read-only journal it is an error unless the file
// already keeps objects.
func (j *Journal) KeepObjects() error {
	var on bool
	if err := j.store.View(func(tx *bolt.Tx) error { on = tx.HasObjects(); return nil }); err != nil || on {
		return err
	}
	if j.store.ReadOnly() {
		return fmt.Errorf("%w: %s is open read-only", ErrObjectsNotKept, j.Path())
	}
	return j.store.Update(func(tx *bolt.Tx) error { return tx.CreateObjects() })
}

// ViewObjects runs fn with a view of the committed objects. Errors: fn's,
// ErrObjectsNotKept, ErrClosed after Close, ErrCorrupt.
func (j *Journal) ViewObjects(fn func(v *ObjectView) error) error {
	return j.store.View(func(tx *bolt.Tx) error {
		if !tx.HasObjects() {
			return ErrObjectsNotKept
		}
		return fn(&ObjectView{tx: tx, head: tx.NextOffset() - 1})
	})
}

// Head is the offset the view is current with: the journal's head in the
// same transaction (0 for an empty journal).
func (v *ObjectView) Head() uint64 { return v.head }

// Get returns key's object. An absent key is (nil, false, nil); a live key
// without a stored object is (nil, false, *NoObjectError).
func (v *ObjectView) Get(key string) ([]byte, bool, error) {
	defer guard()
	if b := v.tx.ObjectGet([]byte(key)); b != nil {
		return b, true, nil
	}
	if v.tx.IndexGet([]byte(key)) != nil {
		return nil, false, &NoObjectError{Key: key}
	}
	return nil, false, nil
}

// Scan calls fn with every live key that starts with prefix, in key
// order, and its stored object, until fn returns false or an error. A
// namespace's objects are the prefix "<namespace>/"; "" is all. obj is nil
// for a live key without a stored object (a file written before objects
// were kept). It walks the index and the objects side by side: no lookup
// per key.
func (v *ObjectView) Scan(prefix string, fn func(key string, obj []byte) (bool, error)) error {
	defer guard()
	return v.tx.ObjectScan([]byte(prefix), func(k, o []byte) (bool, error) { return fn(string(k), o) })
}

// Missing calls fn with every live key that starts with prefix and has no
// stored object, in key order, until fn returns false or an error. On a
// file that has kept objects since it was created it never calls fn.
func (v *ObjectView) Missing(prefix string, fn func(key string) (bool, error)) error {
	return v.Scan(prefix, func(k string, o []byte) (bool, error) {
		if o != nil {
			return true, nil
		}
		return fn(k)
	})
}

// Object returns a copy of key's object and the offset the read is
// current with, in one read transaction (ObjectView.Get's results).
func (j *Journal) Object(key string) (obj []byte, head uint64, ok bool, err error) {
	err = j.ViewObjects(func(v *ObjectView) error {
		head = v.head
		b, found, err := v.Get(key)
		if found {
			obj, ok = append([]byte(nil), b...), true
		}
		return err
	})
	return obj, head, ok, err
}

// checkObjects reports an object whose key is not live in the index (the
// file check: objects change only with the index, so it never holds one).
func checkObjects(tx *bolt.Tx, problem func(format string, args ...any)) error {
	return tx.ObjectKeys(func(k []byte) error {
		if tx.IndexGet(k) == nil {
			problem("objects: %s has an object but no index entry", k)
		}
		return nil
	})
}
