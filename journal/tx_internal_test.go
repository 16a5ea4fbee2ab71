package journal

import (
	"errors"
	"path/filepath"
	"testing"

	"github.com/watchjournal/watchjournal/internal/storage"
)

// Ensure that a panic inside the store, reached through a Tx method, is
// still ErrCorrupt: a Tx whose store transaction is unusable (one that has
// ended) stands for bbolt panicking on a corrupt page.
func TestUpdate_PanicInStoreIsCorrupt(t *testing.T) {
	j, err := Open(filepath.Join(t.TempDir(), "j.db"), &Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	defer j.Close()
	var ended storage.Tx
	if err := j.store.View(func(tx storage.Tx) error { ended = tx; return nil }); err != nil {
		t.Fatal(err)
	}
	err = j.Writer().Update(func(tx *Tx) error {
		broken := &Tx{tx: ended}
		_ = broken.ResourceVersion()
		return nil
	})
	if !errors.Is(err, ErrCorrupt) {
		t.Errorf("Update whose Tx method panicked inside the store = %v; want ErrCorrupt", err)
	}
}
