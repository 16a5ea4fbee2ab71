package journal_test

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/watchjournal/watchjournal/journal"
)

// Ensure WaitForResourceVersion returns once the journal has applied the
// resourceVersion: at once when it already has; on the key's own event;
// on a bookmark, which appends nothing; on equality for a resourceVersion
// that does not parse; and with a *NotAppliedError at the context's
// deadline when it never arrives.
func TestJournal_WaitForResourceVersion(t *testing.T) {
	j := open(t, filepath.Join(t.TempDir(), "j.db"))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	appendEvents(t, j, "10", ev(journal.Added, "wj/a", "u1", "10"))
	if err := j.WaitForResourceVersion(ctx, "wj/a", "10"); err != nil {
		t.Fatalf("applied already: %v", err)
	}
	if err := j.WaitForResourceVersion(ctx, "wj/a", "9"); err != nil {
		t.Fatalf("an older resourceVersion: %v", err)
	}

	wait := func(key, rv string) chan error {
		done := make(chan error, 1)
		go func() { done <- j.WaitForResourceVersion(ctx, key, rv) }()
		return done
	}
	pending := func(what string, done chan error) {
		t.Helper()
		select {
		case err := <-done:
			t.Fatalf("%s: returned %v before it was applied", what, err)
		default:
		}
	}
	// The key's own event.
	done := wait("wj/a", "20")
	pending("event", done)
	appendEvents(t, j, "20", ev(journal.Modified, "wj/a", "u1", "20"))
	if err := <-done; err != nil {
		t.Fatalf("event: %v", err)
	}
	// A bookmark: the resourceVersion moves, nothing is appended.
	done = wait("wj/other", "30")
	pending("bookmark", done)
	appendEvents(t, j, "30")
	if err := <-done; err != nil {
		t.Fatalf("bookmark: %v", err)
	}
	// Not an integer: equal only.
	done = wait("", "x-1")
	pending("opaque", done)
	appendEvents(t, j, "x-1")
	if err := <-done; err != nil {
		t.Fatalf("opaque: %v", err)
	}

	// Never applied.
	na := notAppliedAtDeadline(t, ctx, "never applied", func(ctx context.Context) error { return j.WaitForResourceVersion(ctx, "wj/a", "99") })
	if na.Applied != "x-1" || na.KeyResourceVersion != "20" {
		t.Errorf("NotAppliedError = %+v; want Applied x-1, KeyResourceVersion 20", na)
	}
	if err := j.WaitForResourceVersion(ctx, "wj/a", ""); err == nil {
		t.Error("an empty resourceVersion: nil; want an error")
	}
}
