package journal_test

import (
	"errors"
	"fmt"
	"testing"

	"github.com/watchjournal/watchjournal/journal"
)

// Ensure that the former names (issue 22: "one word, one meaning") stay
// usable for one release as the same values and types as the new ones:
// ErrCompacted is ErrTrimmed, CompactedError is TrimmedError, VerifyReport
// is CheckReport.
func TestJournal_DeprecatedNames_AreTheNewOnes(t *testing.T) {
	err := fmt.Errorf("read: %w", &journal.TrimmedError{Requested: 1, First: 3})
	if !errors.Is(err, journal.ErrTrimmed) || !errors.Is(err, journal.ErrCompacted) {
		t.Errorf("errors.Is(%v, ErrTrimmed / ErrCompacted) = %v / %v; want true / true", err,
			errors.Is(err, journal.ErrTrimmed), errors.Is(err, journal.ErrCompacted))
	}
	var old *journal.CompactedError
	if !errors.As(err, &old) || *old != (journal.TrimmedError{Requested: 1, First: 3}) {
		t.Errorf("errors.As(%v, *CompactedError) = %v; want *TrimmedError{1, 3}", err, old)
	}
	if got, want := err.Error(), "read: journal: offset 1 was trimmed by retention, first retained offset is 3"; got != want {
		t.Errorf("message = %q; want %q", got, want)
	}
	var r journal.VerifyReport = journal.CheckReport{Events: 1}
	if !r.OK() {
		t.Errorf("VerifyReport{Events: 1}.OK() = false; want true")
	}
}
