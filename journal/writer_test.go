package journal_test

import (
	"errors"
	"path/filepath"
	"testing"
	"time"

	"github.com/watchjournal/watchjournal/journal"
	"github.com/watchjournal/watchjournal/journal/bolt"
)

// Ensure that what a Writer writes is what the journal reads.
func TestWriter_WritesWhatTheJournalReads(t *testing.T) {
	j, err := journal.Open(filepath.Join(t.TempDir(), "j.db"), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer j.Close()
	var off uint64
	err = j.Writer().Update(func(tx *journal.Tx) error {
		off, err = tx.Append(&journal.Event{Type: journal.Added, Key: "ns/a", UID: "u", ResourceVersion: "3", Origin: journal.OriginWatch})
		if err != nil {
			return err
		}
		return tx.SetResourceVersion("3")
	})
	if err != nil || off != 1 {
		t.Fatalf("Update = offset %d, %v; want offset 1", off, err)
	}
	if e, ok, err := j.Lookup("ns/a"); err != nil || !ok || e.UID != "u" || e.ResourceVersion != "3" {
		t.Fatalf("Lookup(ns/a) = %+v, %v, %v; want UID u at resourceVersion 3", e, ok, err)
	}
	if rv, err := j.ResourceVersion(); err != nil || rv != "3" {
		t.Fatalf("ResourceVersion() = %q, %v; want 3", rv, err)
	}
}

// Ensure that a read-only journal's Writer writes nothing and says why.
func TestWriter_ReadOnly(t *testing.T) {
	path := filepath.Join(t.TempDir(), "j.db")
	j, err := journal.Open(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	_ = j.Close()
	ro, err := journal.Open(path, &journal.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer ro.Close()
	err = ro.Writer().Update(func(tx *journal.Tx) error {
		_, err := tx.Append(&journal.Event{Type: journal.Added, Key: "ns/a", UID: "u", ResourceVersion: "3", Origin: journal.OriginWatch})
		return err
	})
	if !errors.Is(err, journal.ErrReadOnly) {
		t.Fatalf("Update on a read-only journal = %v; want ErrReadOnly", err)
	}
	if err := ro.Writer().Meta("test").Put("k", []byte("v")); !errors.Is(err, journal.ErrReadOnly) {
		t.Fatalf("Meta.Put on a read-only journal = %v; want ErrReadOnly", err)
	}
	if h, err := ro.Head(); err != nil || h != 0 {
		t.Fatalf("Head() = %d, %v; want 0", h, err)
	}
}

// Ensure that the writer's lock, taken without opening the file
// (bolt.LockWriter, for a tool that replaces the file whole), keeps a
// writer's Open out while it is held, and lets it in once released.
func TestLockWriter_KeepsWritersOut(t *testing.T) {
	path := filepath.Join(t.TempDir(), "j.db")
	release, err := bolt.LockWriter(path, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := journal.Open(path, &journal.Options{Timeout: -1}); !errors.Is(err, journal.ErrLocked) {
		t.Fatalf("Open under LockWriter = %v; want ErrLocked", err)
	}
	release()
	j, err := journal.Open(path, &journal.Options{Timeout: time.Second})
	if err != nil {
		t.Fatalf("Open after release = %v", err)
	}
	_ = j.Close()
}
