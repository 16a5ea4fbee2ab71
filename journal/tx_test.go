package journal_test

import (
	"errors"
	"path/filepath"
	"strings"
	"testing"

	"github.com/watchjournal/watchjournal/journal"
)

// Ensure that a panic in the caller's Update function rolls the
// transaction back and propagates with its value; it is not reported as
// ErrCorrupt, and the file stays healthy and reopens.
func TestJournal_Update_PanicInCallerPropagates(t *testing.T) {
	path := filepath.Join(t.TempDir(), "j.db")
	j, err := journal.Open(path, &journal.Options{Resource: &cm, NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	appendEvents(t, j, "10", ev(journal.Added, "wj/a", "u1", "10"))

	var got any
	var err2 error
	func() {
		defer func() { got = recover() }()
		err2 = j.Writer().Update(func(tx *journal.Tx) error {
			e := ev(journal.Added, "wj/b", "u2", "11")
			if _, err := tx.Append(&e); err != nil {
				return err
			}
			panic("caller's bug")
		})
	}()
	if got != "caller's bug" {
		t.Fatalf("Update with a panicking function: recovered %v, returned %v; want the panic \"caller's bug\" to propagate", got, err2)
	}
	if head, err := j.Head(); err != nil || head != 1 {
		t.Errorf("head after the panicking Update = %d, %v; want 1 (its append rolled back)", head, err)
	}
	// The journal is still usable in this process.
	appendEvents(t, j, "12", ev(journal.Added, "wj/c", "u3", "12"))
	if err := j.Close(); err != nil {
		t.Fatal(err)
	}

	j, err = journal.Open(path, &journal.Options{Resource: &cm, NoSync: true})
	if err != nil {
		t.Fatalf("reopen after a panicking Update = %v; want a healthy file", err)
	}
	defer j.Close()
	rep, err := j.Check()
	if err != nil || !rep.OK() {
		t.Fatalf("Check after a panicking Update = %+v, %v; want no problems", rep, err)
	}
	if _, ok, _ := j.Lookup("wj/b"); ok {
		t.Errorf("wj/b is in the index; want the panicking transaction rolled back")
	}
	if _, ok, _ := j.Lookup("wj/c"); !ok {
		t.Errorf("wj/c is not in the index; want the later Update committed")
	}
}

// Ensure that an error returned by the Update function is returned as is.
func TestJournal_Update_ErrorIsNotCorruption(t *testing.T) {
	j := open(t, filepath.Join(t.TempDir(), "j.db"))
	mine := errors.New("mine")
	if err := j.Writer().Update(func(*journal.Tx) error { return mine }); !errors.Is(err, mine) || errors.Is(err, journal.ErrCorrupt) {
		t.Errorf("Update returning an error = %v; want that error, not ErrCorrupt", err)
	}
}

// Ensure that a key bbolt cannot store (empty, or past its 32 KiB key
// limit) is refused with ErrBadKey where it enters, leaving the file as it
// was, and that a key at the limit is stored.
func TestJournal_BadKeysAreRefusedWhereTheyEnter(t *testing.T) {
	j := open(t, filepath.Join(t.TempDir(), "j.db"))
	long := strings.Repeat("k", journal.MaxKeyBytes+1)
	for _, key := range []string{"", long} {
		e := ev(journal.Added, key, "u", "1")
		err := j.Writer().Update(func(tx *journal.Tx) error { _, err := tx.Append(&e); return err })
		if !errors.Is(err, journal.ErrBadKey) || len(err.Error()) > 1000 {
			t.Errorf("Append with a %d-byte key = %.300v; want a short ErrBadKey", len(key), err)
		}
		rel, err := j.Writer().BeginRelist()
		if err != nil {
			t.Fatal(err)
		}
		if err := rel.Stage([]journal.Event{e}); !errors.Is(err, journal.ErrBadKey) {
			t.Errorf("Stage with a %d-byte key = %.300v; want ErrBadKey", len(key), err)
		}
		if err := rel.MarkSeen([]string{key}); !errors.Is(err, journal.ErrBadKey) {
			t.Errorf("MarkSeen with a %d-byte key = %.300v; want ErrBadKey", len(key), err)
		}
		if err := rel.Abort(); err != nil {
			t.Fatal(err)
		}
		if _, err := j.Consumers().Open(key); !errors.Is(err, journal.ErrBadKey) {
			t.Errorf("Consumer with a %d-byte name = %.300v; want ErrBadKey", len(key), err)
		}
	}
	if head, _ := j.Head(); head != 0 {
		t.Errorf("head = %d after refused keys; want 0", head)
	}
	atLimit := ev(journal.Added, strings.Repeat("k", journal.MaxKeyBytes), "u", "1")
	appendEvents(t, j, "1", atLimit)
	if _, ok, err := j.Lookup(atLimit.Key); !ok || err != nil {
		t.Errorf("Lookup of a key at the limit = %v, %v; want it stored", ok, err)
	}
}
