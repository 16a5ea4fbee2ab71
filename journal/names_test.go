package journal_test

import (
	"errors"
	"fmt"
	"testing"

	"github.com/watchjournal/watchjournal/journal"
)

// Ensure that a wrapped *TrimmedError matches ErrTrimmed and errors.As,
// names both offsets in its message, and that a CheckReport with events
// and no problems is OK.
func TestJournal_TrimmedAndCheckNames(t *testing.T) {
	err := fmt.Errorf("read: %w", &journal.TrimmedError{Requested: 1, First: 3})
	if !errors.Is(err, journal.ErrTrimmed) {
		t.Errorf("errors.Is(%v, ErrTrimmed) = false; want true", err)
	}
	var te *journal.TrimmedError
	if !errors.As(err, &te) || *te != (journal.TrimmedError{Requested: 1, First: 3}) {
		t.Errorf("errors.As(%v, *TrimmedError) = %v; want *TrimmedError{1, 3}", err, te)
	}
	if got, want := err.Error(), "read: journal: offset 1 was trimmed by retention, first retained offset is 3"; got != want {
		t.Errorf("message = %q; want %q", got, want)
	}
	if r := (journal.CheckReport{Events: 1}); !r.OK() {
		t.Errorf("CheckReport{Events: 1}.OK() = false; want true")
	}
}
