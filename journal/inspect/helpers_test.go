package inspect_test

import (
	"path/filepath"
	"testing"

	"github.com/watchjournal/watchjournal/journal"
)

// openJournal opens a new journal file in a temporary directory (closed
// when the test ends) and appends evs to it in one transaction.
func openJournal(t *testing.T, evs ...journal.Event) *journal.Journal {
	t.Helper()
	j, err := journal.Open(filepath.Join(t.TempDir(), "j.db"), &journal.Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { j.Close() })
	if len(evs) == 0 {
		return j
	}
	if err := j.Writer().Update(func(tx *journal.Tx) error {
		for i := range evs {
			if _, err := tx.Append(&evs[i]); err != nil {
				return err
			}
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	return j
}
