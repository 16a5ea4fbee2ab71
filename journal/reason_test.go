package journal_test

// Event.Reason: stored with the event, read back, checked on append, and
// absent (empty) from records written before reasons existed.

import (
	"encoding/binary"
	"errors"
	"path/filepath"
	"testing"
	"time"

	bbolt "go.etcd.io/bbolt"

	"github.com/watchjournal/watchjournal/journal"
	"github.com/watchjournal/watchjournal/journal/bolt"
)

// Every reason that fits a type is stored and read back, through Tx.Append
// and through a staged relist, across a reopen.
func TestEvent_Reason_RoundTrip(t *testing.T) {
	path := filepath.Join(t.TempDir(), "j.db")
	j := open(t, path)
	withReason := func(e journal.Event, r journal.Reason) journal.Event { e.Reason = r; return e }
	appendEvents(t, j, "5",
		ev(journal.Added, "ns/a", "u1", "1"),
		withReason(ev(journal.Deleted, "ns/a", "u1", "2"), journal.ReasonLeftSelector),
		withReason(ev(journal.Added, "ns/a", "u1", "3"), journal.ReasonMoved),
		withReason(ev(journal.Deleted, "ns/a", "u1", "4"), journal.ReasonMoved),
		ev(journal.Added, "ns/a", "u2", "5"),
		withReason(ev(journal.Deleted, "ns/a", "u2", "5"), journal.ReasonGone),
	)
	r, err := j.Writer().BeginRelist()
	if err != nil {
		t.Fatal(err)
	}
	staged := []journal.Event{ev(journal.Added, "ns/b", "u3", "6"), withReason(ev(journal.Deleted, "ns/b", "u3", "6"), journal.ReasonUnconfirmed)}
	for i := range staged {
		staged[i].Origin = journal.OriginRelist
	}
	if err := r.Stage(staged); err != nil {
		t.Fatal(err)
	}
	if _, _, err := r.Commit("7"); err != nil {
		t.Fatal(err)
	}
	_ = j.Close()
	j = open(t, path)
	defer j.Close()
	evs, err := j.Read(1, 100)
	if err != nil {
		t.Fatal(err)
	}
	want := []journal.Reason{"", journal.ReasonLeftSelector, journal.ReasonMoved, journal.ReasonMoved, "", journal.ReasonGone, "", journal.ReasonUnconfirmed}
	if len(evs) != len(want) {
		t.Fatalf("read %d events, want %d", len(evs), len(want))
	}
	for i, e := range evs {
		if e.Reason != want[i] {
			t.Errorf("offset %d (%s %s) reason %q, want %q", e.Offset, e.Type, e.Key, e.Reason, want[i])
		}
	}
	for i, wantDel := range map[int]bool{0: false, 1: false, 2: false, 3: false, 5: true, 7: true} {
		if evs[i].IsDeletion() != wantDel {
			t.Errorf("offset %d (%s, reason %q): IsDeletion %v, want %v", evs[i].Offset, evs[i].Type, evs[i].Reason, !wantDel, wantDel)
		}
	}
}

// A reason that does not fit the event's type, or that this build does
// not know, is refused with ErrBadEvent, by Append and by Stage.
func TestTx_Append_BadReason(t *testing.T) {
	j := open(t, filepath.Join(t.TempDir(), "j.db"))
	defer j.Close()
	appendEvents(t, j, "1", ev(journal.Added, "ns/a", "u1", "1"))
	for _, c := range []struct {
		typ    journal.EventType
		key    string
		reason journal.Reason
	}{
		{journal.Modified, "ns/a", journal.ReasonGone},
		{journal.Modified, "ns/a", journal.ReasonMoved},
		{journal.Added, "ns/b", journal.ReasonLeftSelector},
		{journal.Added, "ns/b", journal.ReasonUnconfirmed},
		{journal.Deleted, "ns/a", "vanished"},
	} {
		e := ev(c.typ, c.key, "u1", "2")
		e.Reason = c.reason
		err := j.Writer().Update(func(tx *journal.Tx) error { _, err := tx.Append(&e); return err })
		if !errors.Is(err, journal.ErrBadEvent) {
			t.Errorf("Append(%s %s reason %q) = %v; want ErrBadEvent", c.typ, c.key, c.reason, err)
		}
		r, err := j.Writer().BeginRelist()
		if err != nil {
			t.Fatal(err)
		}
		e.Origin = journal.OriginRelist
		if err := r.Stage([]journal.Event{e}); !errors.Is(err, journal.ErrBadEvent) {
			t.Errorf("Stage(%s %s reason %q) = %v; want ErrBadEvent", c.typ, c.key, c.reason, err)
		}
		if err := r.Abort(); err != nil {
			t.Fatal(err)
		}
	}
}

// The schema 1 file (written before reasons existed) reads with no reason
// on any event; a read-only open leaves its schema number at 1, a writable
// one migrates it to today's, after which a reason can be appended.
func TestSchemaFiles_V1_NoReasonAndMigrates(t *testing.T) {
	path := copyFile(t, filepath.Join(schemaDir, "v1.db"))
	schema := func() uint32 {
		t.Helper()
		db, err := bbolt.Open(path, 0o600, &bbolt.Options{ReadOnly: true, Timeout: time.Second})
		if err != nil {
			t.Fatal(err)
		}
		defer db.Close()
		var v uint32
		_ = db.View(func(tx *bbolt.Tx) error {
			v = binary.BigEndian.Uint32(tx.Bucket([]byte("meta")).Get([]byte("schema")))
			return nil
		})
		return v
	}
	j, err := journal.Open(path, &journal.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	evs, err := j.Read(0, 100)
	_ = j.Close()
	if err != nil || len(evs) == 0 {
		t.Fatalf("read v1: %d events, %v", len(evs), err)
	}
	for _, e := range evs {
		if e.Reason != "" {
			t.Errorf("v1 offset %d: reason %q, want none", e.Offset, e.Reason)
		}
	}
	if v := schema(); v != 1 {
		t.Fatalf("after a read-only open the schema is %d, want 1", v)
	}
	j, err = journal.Open(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	_ = j.Close()
	if v := schema(); v != bolt.SchemaVersion {
		t.Fatalf("after a writable open the schema is %d, want %d", v, bolt.SchemaVersion)
	}
	if j, err = journal.Open(path, nil); err != nil {
		t.Fatal(err)
	}
	defer j.Close()
	last := evs[len(evs)-1]
	if err := j.Writer().Update(func(tx *journal.Tx) error {
		_, err := tx.Append(&journal.Event{Type: journal.Deleted, Key: last.Key, UID: last.UID, ResourceVersion: "99", Origin: journal.OriginWatch, Reason: journal.ReasonLeftSelector})
		return err
	}); err != nil {
		t.Fatal(err)
	}
	got, err := j.Read(last.Offset+1, 1)
	if err != nil || len(got) != 1 || got[0].Reason != journal.ReasonLeftSelector {
		t.Fatalf("read back %+v, %v; want one DELETED with reason left-selector", got, err)
	}
}
