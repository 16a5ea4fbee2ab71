package journalwrite_test

import (
	"errors"
	"path/filepath"
	"testing"
	"time"

	"github.com/watchjournal/watchjournal/internal/hashrange"
	"github.com/watchjournal/watchjournal/internal/journalwrite"
	"github.com/watchjournal/watchjournal/journal"
)

// Ensure that Of reaches the journal's write side (package journal's
// aliases and this package's are the same types: Of's type assertion
// holds) and that what it writes is what the journal reads.
func TestOf_WritesWhatTheJournalReads(t *testing.T) {
	j, err := journal.Open(filepath.Join(t.TempDir(), "j.db"), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer j.Close()
	w := journalwrite.Of(j)
	var off uint64
	err = w.Update(func(tx journalwrite.Tx) error {
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

// Ensure that LockWriter keeps a writer's Open out while it is held, and
// lets it in once released.
func TestLockWriter_KeepsWritersOut(t *testing.T) {
	path := filepath.Join(t.TempDir(), "j.db")
	release, err := journalwrite.LockWriter(path, 0)
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

// Ensure that ShardSet reads "" as the whole hash space and refuses a
// selector that does not parse.
func TestShardSet(t *testing.T) {
	if s, err := journalwrite.ShardSet(""); err != nil || !s.Equal(hashrange.Full()) {
		t.Fatalf(`ShardSet("") = %v, %v; want the whole space`, s, err)
	}
	if _, err := journalwrite.ShardSet("no such syntax"); !errors.Is(err, hashrange.ErrSyntax) {
		t.Fatalf("ShardSet(bad) = %v; want hashrange.ErrSyntax", err)
	}
}
