package journal_test

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/watchjournal/watchjournal/journal"
)

// Ensure WaitForDeleted returns once the key's delete is applied (and
// not before: WaitForResourceVersion with the object's own resourceVersion
// returns at once, which is why it exists), counts a name taken by
// another UID as deleted, and ends with a *NotAppliedError at the
// context's deadline while the object stays.
func TestJournal_WaitForDeleted(t *testing.T) {
	j := open(t, filepath.Join(t.TempDir(), "j.db"))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	appendEvents(t, j, "10", ev(journal.Added, "wj/a", "u1", "10"), ev(journal.Added, "wj/b", "u2", "10"))

	// Not deleted: the deadline.
	na := notAppliedAtDeadline(t, ctx, "not deleted", func(ctx context.Context) error { return j.WaitForDeleted(ctx, "wj/a", "u1") })
	if na.Key != "wj/a" || na.KeyResourceVersion != "10" {
		t.Errorf("NotAppliedError = %+v; want Key wj/a, KeyResourceVersion 10", na)
	}
	// The object's own resourceVersion is applied: that wait cannot tell
	// a delete.
	if err := j.WaitForResourceVersion(ctx, "wj/a", "10"); err != nil {
		t.Fatal(err)
	}

	// The delete, appended while waiting.
	done := make(chan error, 1)
	go func() { done <- j.WaitForDeleted(ctx, "wj/a", "u1") }()
	appendEvents(t, j, "20", ev(journal.Deleted, "wj/a", "u1", "20"))
	if err := <-done; err != nil {
		t.Fatalf("deleted: %v", err)
	}
	if err := j.WaitForDeleted(ctx, "wj/a", ""); err != nil {
		t.Fatalf("absent, any UID: %v", err)
	}
	// Deleted and created again: another UID.
	appendEvents(t, j, "30", ev(journal.Deleted, "wj/b", "u2", "30"), ev(journal.Added, "wj/b", "u3", "30"))
	if err := j.WaitForDeleted(ctx, "wj/b", "u2"); err != nil {
		t.Fatalf("recreated: %v", err)
	}
	if err := j.WaitForDeleted(ctx, "", "u2"); err == nil {
		t.Error("an empty key: nil; want an error")
	}
}
