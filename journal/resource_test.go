package journal_test

import (
	"errors"
	"path/filepath"
	"testing"

	"github.com/watchjournal/watchjournal/internal/storage"
	"github.com/watchjournal/watchjournal/journal"
)

// Ensure that Resource returns what the file records, and false only when
// it records none.
func TestJournal_Resource(t *testing.T) {
	j := open(t, filepath.Join(t.TempDir(), "j.db"))
	r, ok, err := j.Resource()
	if err != nil || !ok || r != cm {
		t.Errorf("Resource() = %v, %v, %v; want %v, true, nil", r, ok, err, cm)
	}
	bare, err := journal.Open(filepath.Join(t.TempDir(), "bare.db"), &journal.Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	defer bare.Close()
	if r, ok, err := bare.Resource(); err != nil || ok {
		t.Errorf("Resource() of a file recording none = %v, %v, %v; want false, nil", r, ok, err)
	}
}

// Ensure that a read that fails is an error, not "records no resource".
func TestJournal_Resource_ReadErrorIsAnError(t *testing.T) {
	t.Run("closed journal", func(t *testing.T) {
		j := open(t, filepath.Join(t.TempDir(), "j.db"))
		_ = j.Close()
		if r, ok, err := j.Resource(); err == nil {
			t.Errorf("Resource() after Close = %v, %v, nil; want an error", r, ok)
		}
	})
	t.Run("record that does not decode", func(t *testing.T) {
		path := filepath.Join(t.TempDir(), "j.db")
		j := open(t, path)
		if err := journal.StoreOf(j).Update(func(tx storage.Tx) error { return tx.SetMeta("resource", []byte("{not json")) }); err != nil {
			t.Fatal(err)
		}
		if r, ok, err := j.Resource(); !errors.Is(err, journal.ErrBadRecord) {
			t.Errorf("Resource() of an undecodable record = %v, %v, %v; want ErrBadRecord", r, ok, err)
		}
		_ = j.Close()
		// Open must not take the bad record for none and overwrite it.
		if j, err := journal.Open(path, &journal.Options{Resource: &cm, NoSync: true}); !errors.Is(err, journal.ErrBadRecord) {
			if err == nil {
				_ = j.Close()
			}
			t.Errorf("Open of a file whose resource record does not decode = %v; want ErrBadRecord", err)
		}
	})
}
