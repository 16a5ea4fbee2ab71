package journal_test

import (
	"errors"
	"path/filepath"
	"strings"
	"testing"

	"github.com/watchjournal/watchjournal/journal"
)

// Ensure a selector change says what to do next without MigrateSelectors,
// and with it records the new selectors and forgets the resourceVersion
// (so the writer relists), keeping the index, events and consumers; a
// change of more than the selectors is refused either way, with advice of
// its own.
func TestOpen_MigrateSelectors(t *testing.T) {
	path := filepath.Join(t.TempDir(), "j.db")
	first := cm
	first.LabelSelector = "app in (x,y)"
	j, err := journal.Open(path, &journal.Options{Resource: &first, NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	appendEvents(t, j, "12", ev(journal.Added, "wj/a", "u1", "11"), ev(journal.Added, "wj/c", "u3", "12"))
	if err := j.Consumers().Create("controller", 2); err != nil {
		t.Fatal(err)
	}
	committed, err := j.Consumers().Committed("controller")
	if err != nil {
		t.Fatal(err)
	}
	if err := j.Close(); err != nil {
		t.Fatal(err)
	}

	second := cm
	second.LabelSelector = "app=x"
	_, err = journal.Open(path, &journal.Options{Resource: &second, NoSync: true})
	if !errors.Is(err, journal.ErrResourceMismatch) || !strings.Contains(err.Error(), "MigrateSelectors") ||
		!strings.Contains(err.Error(), "remove the file") {
		t.Fatalf("Open with another selector = %v; want ErrResourceMismatch naming MigrateSelectors and removing the file", err)
	}
	other := second
	other.Namespace = "elsewhere"
	_, err = journal.Open(path, &journal.Options{Resource: &other, MigrateSelectors: true, NoSync: true})
	if !errors.Is(err, journal.ErrResourceMismatch) || !strings.Contains(err.Error(), "new path") || strings.Contains(err.Error(), "MigrateSelectors") {
		t.Fatalf("Open of another namespace with MigrateSelectors = %v; want ErrResourceMismatch advising a new path", err)
	}

	j, err = journal.Open(path, &journal.Options{Resource: &second, MigrateSelectors: true, NoSync: true})
	if err != nil {
		t.Fatalf("Open with MigrateSelectors: %v", err)
	}
	defer j.Close()
	res, _, err := j.Resource()
	if err != nil || res.LabelSelector != "app=x" {
		t.Errorf("recorded resource after migration = %v, %v; want -l app=x", res, err)
	}
	if rv, err := j.ResourceVersion(); err != nil || rv != "" {
		t.Errorf("resourceVersion after migration = %q, %v; want none (the writer relists)", rv, err)
	}
	st, err := j.Stats()
	if err != nil || st.Objects != 2 || st.LastOffset != 2 {
		t.Errorf("stats after migration = %+v, %v; want the index (2 objects) and events (head 2) kept", st, err)
	}
	if c, err := j.Consumers().Committed("controller"); err != nil || c != committed {
		t.Errorf("consumer after migration = %d, %v; want %d, as before", c, err, committed)
	}
}
