package journal

import (
	"fmt"

	"github.com/watchjournal/watchjournal/internal/storage"
)

// Tx is a write transaction: the index, the journal and the last synced
// resourceVersion change together when it commits. It is valid only
// inside the function given to Writer.Update, and only in that function's
// goroutine.
type Tx struct {
	tx       storage.Tx
	j        *Journal
	seal     *sealer // seal.go
	appended int
}

// Update runs fn in one write transaction. Everything fn appends, and the
// resourceVersion it sets, is committed together when fn returns nil, and
// nothing is when it returns an error. Group commit: put many events in one
// Update. Followers (Wait) wake after the commit.
//
// A panic in fn's own code rolls the transaction back and then propagates
// from Update with fn's value: the file is untouched and stays healthy.
// Only a panic inside the store (on a corrupt page, reached through a Tx
// method) is returned as ErrCorrupt.
func (w *Writer) Update(fn func(*Tx) error) error {
	var t *Tx
	err := w.j.store.Update(func(tx storage.Tx) error {
		t = &Tx{tx: tx, j: w.j, seal: w.j.seal}
		return fn(t)
	})
	if err == nil && t.appended > 0 {
		w.j.wake()
	}
	return err
}

// Lookup returns the index entry for key as this transaction sees it.
func (t *Tx) Lookup(key string) (IndexEntry, bool, error) { return lookup(t.tx, key) }

// lookup returns the index entry for key in tx, and false when key is absent.
func lookup(tx storage.Tx, key string) (IndexEntry, bool, error) {
	v := tx.IndexGet([]byte(key))
	if v == nil {
		return IndexEntry{}, false, nil
	}
	e, err := decodeIndex([]byte(key), v)
	return e, err == nil, err
}

// Append assigns e the next offset, stores it, and applies it to the index:
// ADDED and MODIFIED set key → (RV, UID), DELETED removes the key. A zero
// e.Time is set to the current time, and a time earlier than the latest
// event's is raised to it, so that times never decrease with offsets
// (clock.go). e.PrevOffset is set from the index (see Event.PrevOffset).
// In a file that keeps objects (Settings.KeepObjects), a DELETED without an
// Object is stored with the key's last stored object (see Event.Object);
// e.Object is left as it is. It returns the offset assigned.
//
// e must be well-formed (else ErrBadEvent): Type one of ADDED, MODIFIED,
// DELETED; Key non-empty; Origin non-empty (watch, relist or restart: the
// writer must say how it learned of the event, since consumers tell live
// events from inferred ones by it); Reason empty or one of the Reason
// constants that fits Type (see Reason). And e must agree with the index (else
// a *KeyStateError, ErrKeyState): ADDED only for an absent key, MODIFIED
// and DELETED only for a present one (journal/doc.go, "Guarantees"); a key
// empty or too long is ErrBadKey. On an error nothing of e is stored; the
// transaction may go on.
func (t *Tx) Append(e *Event) (uint64, error) {
	if err := checkKey("key", e.Key); err != nil {
		return 0, err
	}
	key := []byte(e.Key) // once: the store's methods take bytes
	v, err := t.check(e, key)
	if err != nil {
		return 0, err
	}
	if _, err := t.j.stamp(t.tx, e); err != nil {
		return 0, err
	}
	setPrevOffset(e, v)
	stored := e
	if obj := lastObject(t.tx, key, v, e); obj != nil {
		c := *e // a tombstone stored with the key's last object (objects.go); e keeps its own
		c.Object = obj
		stored = &c
	}
	rec, err := t.seal.encode(stored) // seal.go: encodeEvent, the Object sealed where the journal seals
	if err != nil {
		return 0, err
	}
	if err := t.j.put(t.tx, key, e, rec); err != nil {
		return 0, err
	}
	t.appended++
	return e.Offset, nil
}

// put appends rec, the stored form of e, to the journal and applies e at
// its offset (e.Offset, left 0 on an error) to the index and the secondary
// indexes; key is e.Key's bytes.
func (j *Journal) put(tx storage.Tx, key []byte, e *Event, rec []byte) (err error) {
	if e.Offset, err = tx.Append(rec); err != nil {
		e.Offset = 0
		return fmt.Errorf("journal: append: %w", err)
	}
	if err = applyIndex(tx, key, e); err == nil {
		err = j.applyIndexes(tx, key, e)
	}
	if err != nil {
		e.Offset = 0
	}
	return err
}

// putDirect is put for an ADDED of a first list's direct appends
// (relist.go): its secondary index entries are gathered in bulk, to be
// put in key order at the end of the transaction (indexbulk.go).
func (j *Journal) putDirect(tx storage.Tx, key []byte, e *Event, rec []byte, bulk *bulkIndexes) (err error) {
	if e.Offset, err = tx.Append(rec); err != nil {
		e.Offset = 0
		return fmt.Errorf("journal: append: %w", err)
	}
	if err = applyIndex(tx, key, e); err == nil {
		err = bulk.add(j, tx, key, e)
	}
	if err != nil {
		e.Offset = 0
	}
	return err
}

// check returns why e cannot be appended, nil when it can, and the key's
// index value (nil when absent); key is e.Key's bytes.
func (t *Tx) check(e *Event, key []byte) ([]byte, error) {
	switch {
	case e.Type != Added && e.Type != Modified && e.Type != Deleted:
		return nil, fmt.Errorf("%w: type %q", ErrBadEvent, e.Type)
	case e.Key == "":
		return nil, fmt.Errorf("%w: empty key", ErrBadEvent)
	case e.Origin == "":
		return nil, fmt.Errorf("%w: empty origin for %s %q", ErrBadEvent, e.Type, e.Key)
	}
	if err := checkReason(e.Type, e.Reason); err != nil {
		return nil, err
	}
	v := t.tx.IndexGet(key)
	if (v != nil) == (e.Type == Added) {
		ke := &KeyStateError{Type: e.Type, Key: e.Key, Present: v != nil}
		if v != nil {
			if ie, err := decodeIndex(key, v); err == nil {
				ke.UID = ie.UID
			}
		}
		return nil, ke
	}
	return v, nil
}

// setPrevOffset sets e.PrevOffset from v, the key's index value before e
// is stored: for a MODIFIED or DELETED the offset the entry points
// at (the key's previous event, when that one carried an object; 0 when
// it carried none, or for an entry written by schema 1), 0 for an ADDED.
// The entry points at the key's last event only when that event had an
// object (applyIndex), so a non-zero PrevOffset is always the key's
// immediately previous event.
func setPrevOffset(e *Event, v []byte) {
	e.PrevOffset = 0
	if e.Type == Modified || e.Type == Deleted {
		e.PrevOffset = indexObject(v)
	}
}

// applyIndex applies e, just stored at e.Offset, to the index: the entry
// points at e's record when e carries an object (objects.go). key is
// e.Key's bytes.
func applyIndex(tx storage.Tx, key []byte, e *Event) error {
	if err := applyObject(tx, key, e); err != nil {
		return err
	}
	switch e.Type {
	case Added, Modified:
		var object uint64
		if len(e.Object) > 0 {
			object = e.Offset
		}
		return tx.IndexPut(key, encodeIndex(e.UID, e.ResourceVersion, object))
	case Deleted:
		return tx.IndexDelete(key)
	}
	return fmt.Errorf("journal: unknown event type %q", e.Type)
}

// SetResourceVersion records rv as the last synced resourceVersion, the
// point a watch resumes from.
func (t *Tx) SetResourceVersion(rv string) error {
	return t.tx.SetMeta(metaRV, []byte(rv))
}

// ResourceVersion returns the last synced resourceVersion as this
// transaction sees it.
func (t *Tx) ResourceVersion() string {
	return string(t.tx.Meta(metaRV))
}
