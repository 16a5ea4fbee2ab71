package journal

// Objects: the latest object of every live key, readable from the file.
//
// Design (schema 2). Each index entry holds, beside the UID and the
// resourceVersion, the offset of the key's last event that carried an
// object (its ADDED or MODIFIED, as served: JSON or protobuf, Event.Object; for a metadata-only
// journal the metadata that was stored). Get and List follow it into the
// journal record and return the object's bytes from bbolt's memory-mapped
// page (record.go: the record is checked and walked to its Object field,
// not decoded). The entry is rewritten by every event anyway, so keeping
// the pointer costs about 5 bytes an entry and nothing per write: the
// object is written once, in the journal record.
//
// The objects bucket, key → object bytes, holds only what the journal no
// longer does: when retention trimming (the writer's Trim) deletes a record
// that is still a live key's latest object, it copies that object into
// the bucket first, in the same transaction. A read prefers the record the
// entry points at and falls back to the bucket, so:
//
//   - a later ADDED or MODIFIED with an object supersedes the bucket's
//     copy (the entry points at the newer record; the copy is overwritten
//     when that record is trimmed in turn);
//   - a DELETED (a tombstone included) removes the key's copy, and so does
//     an ADDED or MODIFIED without an object, so that a stale object is
//     never served as current;
//   - a DELETED without an object (a tombstone: a relist's inferred
//     deletion) is stored with the key's last object, read from the
//     record or the copy in the same transaction, before the copy goes
//     (lastObject): the event keeps the final state even when retention
//     trimmed every record of the key;
//   - a relist's MODIFIED or ADDED carries the listed object and points
//     the entry at it, like a watch event (applyIndex, for live appends
//     and for a relist moved out of its stage file alike);
//   - a restart, and a file rewrite (journalctl compact, which keeps
//     offsets), read the same pointers and copies;
//   - a reader (ObjectView, one bbolt read transaction) sees the objects,
//     the index and the head of one commit: never uncommitted state, and
//     Head says which offset the read is current with.
//
// Cost. Per write: nothing measurable beyond the entry's pointer, and for
// a DELETED or an object-less event one lookup in the objects bucket
// (bench.BenchmarkJournalAppend …/nosync against …/nosync/objects). On
// disk: the journal records already hold the objects; the bucket holds one
// copy of each live key whose latest event was trimmed (at most the live
// objects' bytes plus bbolt's page overhead, for a journal trimmed far
// behind every key's last change). Retention trimming costs
// one index lookup per deleted record, and one bucket put for each of a
// live key whose latest object is that record or a newer one (so that it
// can be the old object of the key's next retained event: "Previous
// objects" below): no append writes a copy, trimming writes at most one
// per trimmed record (bench.BenchmarkJournalTrim measures the worst case,
// every record copied; BENCHMARKS.md has its figures). A tombstone
// (lastObject) costs an index decode and one record or bucket read in its
// transaction, and its record holds the object's bytes, as a watch's
// DELETED does.
//
// Previous objects. The bucket also gives an event's old object once the
// record at its PrevOffset is trimmed (ObjectView.Previous): trimming
// copies a record's object into the bucket also when the key's latest
// object is a newer record (not only when it is the record itself), and
// trims oldest first, so after a trim each live key's copy is the object
// of its last trimmed record, which is the PrevOffset of its first
// retained event. The read checks the copy against the event's
// PrevResourceVersion and UID. A reader that has not delivered an event
// yet must hold retention below the event (a consumer), or a later trim
// of the key's records overwrites the copy; jcache does. Reads of the
// current object are unchanged: they prefer the record the index points
// at, which exists whenever the copy is an older state. The cost: a bucket
// put for every trimmed record of a live key (not only its latest), the
// bucket's size bound unchanged (one copy per live key).
//
// KeepObjects (opt-in; journal/cache's NewReader calls it) is the
// bucket's presence in the file. Without it the pointers are written all
// the same, but trimming copies nothing. Package journal/cache serves the
// objects (ViewObjects) as a controller-runtime client.Reader and a
// client-go-style lister.
//
// Older files. A schema 1 file opens; a writable open marks it schema 2 or later
// (its entries keep their old form, without a pointer, until their key
// changes). A file that kept objects under schema 1 has every live key's
// object in the bucket, so its reads are whole at once. Otherwise a live
// key without a pointer to a retained record and without a copy reads as
// ErrNoObject, and ObjectView.Missing lists those keys: switched on over
// a non-empty index, keys whose latest record was already trimmed fill as
// they change. A relist does not fill keys that did not change (it
// journals nothing for them).

import (
	"bytes"
	"errors"
	"fmt"
	"unsafe"

	"k8s.io/apimachinery/pkg/util/resourceversion"

	"github.com/watchjournal/watchjournal/internal/storage"
	"github.com/watchjournal/watchjournal/journal/internal/storedobj"
)

// ErrObjectsNotKept: the file does not keep objects (KeepObjects was
// never called on it by a writer).
var ErrObjectsNotKept = errors.New("journal: the file does not keep objects (Journal.KeepObjects)")

// ErrNoObject matches a *NoObjectError: the key is live in the index but
// the file holds no object for it (its latest event carried none, or was
// trimmed before objects were kept, and the key has not changed since).
var ErrNoObject = errors.New("journal: no object stored")

// NoObjectError names the live key that has no stored object.
type NoObjectError struct{ Key string }

func (e *NoObjectError) Error() string {
	return fmt.Sprintf("journal: no object stored for live key %q (its latest event carried none, or was trimmed before objects were kept; it fills on the key's next change)", e.Key)
}

// Is makes errors.Is(err, ErrNoObject) true.
func (e *NoObjectError) Is(target error) bool { return target == ErrNoObject }

// applyObject keeps the objects bucket in step with the index for e: a
// copy the index entry will no longer supersede (a DELETED, or an event
// without an object) is removed. key is e.Key's bytes.
func applyObject(tx storage.Tx, key []byte, e *Event) error {
	if e.Type != Deleted && len(e.Object) > 0 {
		return nil
	}
	return tx.ObjectDelete(key)
}

// lastObject returns the object a DELETED without one (a tombstone) is
// stored with in a file that keeps objects (see the top of the file): the
// key's last stored object as ObjectView.Get finds it, an envelope still
// sealed (seal.go binds it to the key, not the offset), aliasing tx's
// pages. nil when e is not such a DELETED, the file keeps no objects, the
// entry's UID is not e's, no object is held, or the record is damaged (the
// deletion is journaled all the same; a read reports the damage).
func lastObject(tx storage.Tx, key, v []byte, e *Event) []byte {
	if e.Type != Deleted || len(e.Object) > 0 || v == nil || !tx.HasObjects() {
		return nil
	}
	if ie, err := decodeIndex(key, v); err != nil || ie.UID != e.UID {
		return nil
	}
	obj, err := objectAt(tx, key, v)
	if err != nil {
		return nil
	}
	if obj == nil {
		obj = tx.ObjectGet(key)
	}
	return obj
}

// keepTrimmed copies the object of the record rec at off, about to be
// trimmed, into the objects bucket when the key is live and its latest
// object is that record or a newer one ("Previous objects" at the top of
// the file); a key whose latest event carried none gets no copy, and a
// damaged record is left to go. An object sealed under another key than
// s's primary is sealed again under the primary (seal.go, "Rotation"),
// when s holds its key.
func keepTrimmed(tx storage.Tx, off uint64, rec []byte, s *sealer) error {
	key, obj, err := recordObject(off, rec)
	if err != nil || obj == nil {
		return nil
	}
	if v := tx.IndexGet(key); v == nil || indexObject(v) < off {
		return nil
	}
	if resealed, err := s.reseal(string(key), obj); err == nil {
		obj = resealed // else kept as it is: a read reports the damage
	}
	return tx.ObjectPut(bytes.Clone(key), bytes.Clone(obj))
}

// objectAt returns the object of the record the index value v points at,
// nil when v points at none or at a trimmed record.
func objectAt(tx storage.Tx, key, v []byte) ([]byte, error) {
	off := indexObject(v)
	if off == 0 {
		return nil, nil
	}
	rec := tx.Record(off)
	if rec == nil {
		return nil, nil
	}
	k, obj, err := recordObject(off, rec)
	if err != nil {
		return nil, err
	}
	if string(k) != string(key) {
		return nil, fmt.Errorf("%w: index entry %q points at offset %d, an event of %q", ErrBadRecord, key, off, k)
	}
	return obj, nil
}

// ObjectView reads objects within one read transaction. It is valid
// only inside the function given to ViewObjects; the byte slices it gives
// are the file's memory-mapped pages, valid only until that function returns
// (copy or decode them there).
type ObjectView struct {
	tx     storage.Tx
	head   uint64 // Head's, once read (headOK)
	headOK bool
	seal   *sealer // opens sealed objects (seal.go)
}

// KeepObjects makes the file keep the latest object of every live key
// through retention trimming from now on (see objects.go for the cost),
// for this and every later writer. Call it before retention first trims
// the journal (before the first list, simplest) for a complete cache. It is
// idempotent; on a read-only journal it is an error unless the file
// already keeps objects.
func (s Settings) KeepObjects() error {
	j := s.j
	var on bool
	if err := j.store.View(func(tx storage.Tx) error { on = tx.HasObjects(); return nil }); err != nil || on {
		return err
	}
	if j.store.ReadOnly() {
		return fmt.Errorf("%w: %s is open read-only", ErrObjectsNotKept, j.Path())
	}
	return j.store.Update(func(tx storage.Tx) error { return tx.CreateObjects() })
}

// ViewObjects runs fn with a view of the committed objects. Errors: fn's,
// ErrObjectsNotKept, ErrClosed after Close, ErrCorrupt. A panic in fn ends
// the read transaction and then propagates from ViewObjects with fn's
// value (it is not ErrCorrupt: the store's panics are only those of its
// own reads).
//
// Cost (the per-read overhead of a Get): the objects bucket's
// presence is checked in the transaction only until it is first seen
// (objectsKept: the bucket, once created, is never deleted, so a later
// transaction of this Journal has it too), and the head is read only when
// the view's Head is asked for, so that a Get opens the index and journal
// buckets and nothing else.
func (j *Journal) ViewObjects(fn func(v *ObjectView) error) error {
	return j.store.View(func(tx storage.Tx) error {
		if !j.objectsKept.Load() {
			if !tx.HasObjects() {
				return ErrObjectsNotKept
			}
			j.objectsKept.Store(true)
		}
		return fn(&ObjectView{tx: tx, seal: j.seal})
	})
}

// Head is the offset the view is current with: the journal's head in the
// same transaction (0 for an empty journal). It is read from the file on
// the first call.
func (v *ObjectView) Head() uint64 {
	if !v.headOK {
		v.head, v.headOK = v.tx.NextOffset()-1, true
	}
	return v.head
}

// Get returns key's object. An absent key is (nil, false, nil); a live key
// without a stored object is (nil, false, *NoObjectError). A damaged
// record is an error matching ErrBadRecord. A sealed object (seal.go) is
// returned opened, in memory of its own, or as a *SealedError when the
// journal lacks its key.
func (v *ObjectView) Get(key string) ([]byte, bool, error) {
	// key's bytes, not a copy: the lookups below only compare them (a
	// read transaction's bbolt Get keeps no reference to its key).
	k := unsafe.Slice(unsafe.StringData(key), len(key))
	iv := v.tx.IndexGet(k)
	if iv == nil {
		return nil, false, nil
	}
	b, err := objectAt(v.tx, k, iv)
	if err != nil {
		return nil, false, err
	}
	if b == nil {
		b = v.tx.ObjectGet(k)
	}
	if b == nil {
		return nil, false, &NoObjectError{Key: key}
	}
	if b, err = v.seal.open(key, b); err != nil {
		return nil, false, err
	}
	return b, true, nil
}

// Scan calls fn with every live key that starts with prefix, in key
// order, and its stored object, until fn returns false or an error. A
// namespace's objects are the prefix "<namespace>/"; "" is all. obj is nil
// for a live key without a stored object (see Missing). It walks the index
// and the objects bucket side by side, and reads each object from the
// journal record its entry points at. A panic in fn propagates from Scan
// with fn's value (it is not ErrCorrupt).
//
// A sealed object is passed opened; one whose key the journal lacks ends
// the scan with a *SealedError.
func (v *ObjectView) Scan(prefix string, fn func(key string, obj []byte) (bool, error)) error {
	return v.scan(prefix, true, fn)
}

// scan is Scan; open false passes sealed objects as they are stored.
func (v *ObjectView) scan(prefix string, open bool, fn func(key string, obj []byte) (bool, error)) error {
	return v.tx.ObjectScan([]byte(prefix), func(k, iv, copied []byte) (bool, error) {
		o, err := objectAt(v.tx, k, iv)
		if err != nil {
			return false, err
		}
		if o == nil {
			o = copied
		}
		key := string(k)
		if open && o != nil {
			if o, err = v.seal.open(key, o); err != nil {
				return false, err
			}
		}
		return fn(key, o)
	})
}

// Previous returns the object of e's key's previous event (the one at
// e.PrevOffset, which e's OnUpdate-style old object is): from that record
// while the journal retains it, else the copy retention trimming kept in
// the objects bucket, when the copy is that object — its
// metadata.resourceVersion is e.PrevResourceVersion and its metadata.uid
// e.UID (a copy of another state is not returned). A watch MODIFIED
// carries no PrevResourceVersion (only a relist's does); then the copy's
// UID must be e.UID and its resourceVersion older than e's (compared with
// apimachinery's CompareResourceVersion), and which older state it is
// rests on the reader holding retention (see "Previous objects"). ok is false when the
// event has no previous event, the previous event carried no object, or
// neither the record nor a matching copy is held (a trim of the key's
// later records overwrote the copy, or the file kept no objects when the
// record went). A damaged record is an error matching ErrBadRecord; a
// sealed object (seal.go) is returned opened, or as a *SealedError when
// the journal lacks its key.
func (v *ObjectView) Previous(e Event) (obj []byte, ok bool, err error) {
	if e.PrevOffset == 0 {
		return nil, false, nil
	}
	k := []byte(e.Key)
	if rec := v.tx.Record(e.PrevOffset); rec != nil {
		pk, o, err := recordObject(e.PrevOffset, rec)
		if err != nil {
			return nil, false, err
		}
		if string(pk) != e.Key || o == nil {
			return nil, false, nil
		}
		if o, err = v.seal.open(e.Key, o); err != nil {
			return nil, false, err
		}
		return o, true, nil
	}
	c, err := v.seal.open(e.Key, v.tx.ObjectGet(k))
	if c == nil || err != nil {
		return nil, false, err
	}
	m, err := storedobj.ReadMeta(c)
	if err != nil || (e.UID != "" && m.UID != e.UID) {
		return nil, false, nil
	}
	if e.PrevResourceVersion != "" {
		if m.ResourceVersion != e.PrevResourceVersion {
			return nil, false, nil
		}
		return c, true, nil
	}
	// A watch MODIFIED does not carry PrevResourceVersion: the copy must
	// at least be older than e.
	if n, err := resourceversion.CompareResourceVersion(m.ResourceVersion, e.ResourceVersion); err != nil || n >= 0 {
		return nil, false, nil
	}
	return c, true, nil
}

// Missing calls fn with every live key that starts with prefix and has no
// stored object, in key order, until fn returns false or an error. On a
// file that has kept objects since it was created it never calls fn.
func (v *ObjectView) Missing(prefix string, fn func(key string) (bool, error)) error {
	return v.scan(prefix, false, func(k string, o []byte) (bool, error) {
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
		head = v.Head()
		b, found, err := v.Get(key)
		if found {
			obj, ok = append([]byte(nil), b...), true
		}
		return err
	})
	return obj, head, ok, err
}

// checkObjects reports an object whose key is not live in the index (the
// file check: objects change only with the index, so it never holds one),
// and an index entry that points at a retained record of another key or
// without an object.
func checkObjects(tx storage.Tx, problem func(format string, args ...any)) error {
	err := tx.ObjectKeys(func(k []byte) error {
		if tx.IndexGet(k) == nil {
			problem("objects: %s has an object but no index entry", k)
		}
		return nil
	})
	if err != nil {
		return err
	}
	return tx.IndexScan(nil, func(k, v []byte) (bool, error) {
		off := indexObject(v)
		if off == 0 {
			return true, nil
		}
		if obj, err := objectAt(tx, k, v); err != nil {
			problem("index: %v", err)
		} else if obj == nil && tx.Record(off) != nil {
			problem("index: %s points at offset %d, an event without an object", k, off)
		}
		return true, nil
	})
}

// ObjectJSON returns a stored object (Event.Object, Journal.Object, an
// ObjectView's bytes) as the apiserver would have served it in JSON, with
// kind and apiVersion: JSON as it is (b itself, not a copy), Kubernetes
// protobuf decoded into its Go type from client-go's scheme and encoded
// with encoding/json, as the apiserver's JSON serializer does; nil or
// empty (an event without an object) as it is. Protobuf that does not
// decode, a kind the scheme does not know, and bytes that are neither a
// JSON object nor protobuf (a sealed object not opened: Journal reads
// open it when they hold the key, seal.go) are errors matching
// ErrBadObject.
func ObjectJSON(b []byte) ([]byte, error) { return storedobj.JSON(b) }
