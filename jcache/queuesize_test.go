package jcache

import (
	"math"
	"strings"
	"testing"
)

func TestQueueWarning(t *testing.T) {
	for _, c := range []struct {
		objects uint64
		limit   int64
		warn    bool
	}{
		{1_000_000, math.MaxInt64, false}, // no limit
		{1_000_000, 230 << 20, true},      // a million in 256 MiB at 90%
		{300_000, 230 << 20, false},       // 95 MiB of 230: under half
		{400_000, 230 << 20, true},        // 127 MiB of 230
		{0, 1, false},
	} {
		msg := queueWarning(c.objects, c.limit)
		if (msg != "") != c.warn {
			t.Errorf("queueWarning(%d, %d) = %q, want a warning: %v", c.objects, c.limit, msg, c.warn)
		}
		if c.warn && !strings.Contains(msg, "jcache.Exact") {
			t.Errorf("queueWarning(%d, %d) = %q: does not name jcache.Exact", c.objects, c.limit, msg)
		}
	}
}
