package journal

import (
	"fmt"

	"github.com/watchjournal/watchjournal/journal/bolt"
)

// Tx is a write transaction: the index, the journal and the last synced
// resourceVersion change together when it commits. It is valid only inside
// the function given to Update.
type Tx struct {
	tx       *bolt.Tx
	appended int
}

// Update runs fn in one write transaction. Everything fn appends, and the
// resourceVersion it sets, is committed together when fn returns nil, and
// nothing is when it returns an error. Group commit: put many events in one
// Update. Followers (Wait) wake after the commit.
func (j *Journal) Update(fn func(*Tx) error) error {
	var t *Tx
	err := j.store.Update(func(btx *bolt.Tx) error {
		t = &Tx{tx: btx}
		return fn(t)
	})
	if err == nil && t != nil && t.appended > 0 {
		j.wake()
	}
	return err
}

// Lookup returns the index entry for key as this transaction sees it.
func (t *Tx) Lookup(key string) (IndexEntry, bool, error) {
	v := t.tx.IndexGet([]byte(key))
	if v == nil {
		return IndexEntry{}, false, nil
	}
	e, err := decodeIndex([]byte(key), v)
	return e, err == nil, err
}

// Append assigns e the next offset, stores it, and applies it to the index:
// ADDED and MODIFIED set key → (RV, UID), DELETED removes the key. A zero
// e.Time is set to the current time. It returns the offset assigned.
//
// e must be well-formed (else ErrBadEvent): Type one of ADDED, MODIFIED,
// DELETED; Key non-empty; Origin non-empty (watch, relist or restart: the
// writer must say how it learned of the event, since consumers tell live
// events from inferred ones by it). And e must agree with the index (else
// a *KeyStateError, ErrKeyState): ADDED only for an absent key, MODIFIED
// and DELETED only for a present one (journal/doc.go, "Guarantees"). On an
// error nothing of e is stored; the transaction may go on.
func (t *Tx) Append(e *Event) (uint64, error) {
	if err := t.check(e); err != nil {
		return 0, err
	}
	if e.Time.IsZero() {
		e.Time = now()
	}
	rec, err := encodeEvent(e)
	if err != nil {
		return 0, err
	}
	off, err := t.tx.Append(rec)
	if err != nil {
		return 0, fmt.Errorf("journal: append: %w", err)
	}
	if err := applyIndex(t.tx, e); err != nil {
		return 0, err
	}
	e.Offset = off
	t.appended++
	return off, nil
}

// check returns why e cannot be appended, nil when it can.
func (t *Tx) check(e *Event) error {
	switch {
	case e.Type != Added && e.Type != Modified && e.Type != Deleted:
		return fmt.Errorf("%w: type %q", ErrBadEvent, e.Type)
	case e.Key == "":
		return fmt.Errorf("%w: empty key", ErrBadEvent)
	case e.Origin == "":
		return fmt.Errorf("%w: empty origin for %s %q", ErrBadEvent, e.Type, e.Key)
	}
	v := t.tx.IndexGet([]byte(e.Key))
	if (v != nil) == (e.Type == Added) {
		ke := &KeyStateError{Type: e.Type, Key: e.Key, Present: v != nil}
		if v != nil {
			if ie, err := decodeIndex([]byte(e.Key), v); err == nil {
				ke.UID = ie.UID
			}
		}
		return ke
	}
	return nil
}

func applyIndex(tx *bolt.Tx, e *Event) error {
	switch e.Type {
	case Added, Modified:
		return tx.IndexPut([]byte(e.Key), encodeIndex(e.UID, e.ResourceVersion))
	case Deleted:
		return tx.IndexDelete([]byte(e.Key))
	}
	return fmt.Errorf("journal: unknown event type %q", e.Type)
}

// SetResourceVersion records rv as the last synced resourceVersion, the
// point a watch resumes from.
func (t *Tx) SetResourceVersion(rv string) error { return t.tx.SetMeta(metaRV, []byte(rv)) }

// ResourceVersion returns the last synced resourceVersion as this
// transaction sees it.
func (t *Tx) ResourceVersion() string { return string(t.tx.Meta(metaRV)) }
