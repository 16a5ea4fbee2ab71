package journal_test

// Helpers shared by the journal package's tests; open, appendEvents and ev
// are in journal_test.go.

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/watchjournal/watchjournal/journal"
)

// notAppliedAtDeadline runs wait with a context that ends in 300ms and
// returns the *NotAppliedError it must end with; what names the wait in
// the failure message.
func notAppliedAtDeadline(t *testing.T, ctx context.Context, what string, wait func(context.Context) error) *journal.NotAppliedError {
	t.Helper()
	dctx, dcancel := context.WithTimeout(ctx, 300*time.Millisecond)
	defer dcancel()
	err := wait(dctx)
	var na *journal.NotAppliedError
	if !errors.As(err, &na) || !errors.Is(err, journal.ErrNotApplied) || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("%s = %v; want a *NotAppliedError matching ErrNotApplied and DeadlineExceeded", what, err)
	}
	return na
}

// keepObjects turns on j's objects bucket (Settings.KeepObjects).
func keepObjects(t *testing.T, j *journal.Journal) {
	t.Helper()
	if err := j.Settings().KeepObjects(); err != nil {
		t.Fatal(err)
	}
}
