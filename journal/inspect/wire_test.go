package inspect

import (
	"testing"
	"time"

	"github.com/watchjournal/watchjournal/journal"
)

// Ensure a retention survives its JSON form (Retention) and back, as the
// client reads it from GET /retention. (Moved from journalctl's
// TestFormatRetention.)
func TestRetention_RoundTrip(t *testing.T) {
	for _, r := range []journal.Retention{
		{},
		{MaxEvents: 10000, MaxBytes: 64 << 20, MaxAge: 24 * time.Hour, HardMaxBytes: 1 << 30},
		{MaxAge: 90 * time.Minute},
	} {
		back, err := NewRetention(r).retention()
		if back != r || err != nil {
			t.Errorf("JSON round trip of %+v = %+v, %v", r, back, err)
		}
	}
}
