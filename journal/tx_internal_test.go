package journal

import (
	"errors"
	"path/filepath"
	"testing"

	"github.com/watchjournal/watchjournal/journal/bolt"
)

// Ensure that a panic inside the store, reached through a Tx method, is
// still ErrCorrupt: a Tx whose store transaction is unusable stands for
// bbolt panicking on a corrupt page.
func TestUpdate_PanicInStoreIsCorrupt(t *testing.T) {
	j, err := Open(filepath.Join(t.TempDir(), "j.db"), &Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	defer j.Close()
	err = j.Writer().Update(func(tx *Tx) error {
		broken := &Tx{tx: &bolt.Tx{}}
		_ = broken.ResourceVersion()
		return nil
	})
	if !errors.Is(err, ErrCorrupt) {
		t.Errorf("Update whose Tx method panicked inside the store = %v; want ErrCorrupt", err)
	}
}
