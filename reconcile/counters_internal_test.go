package reconcile

import (
	"testing"
	"time"

	"github.com/watchjournal/watchjournal/journal"
)

func TestHistogram_Observe(t *testing.T) {
	var h Histogram
	for _, d := range []time.Duration{500 * time.Microsecond, time.Millisecond, 3 * time.Millisecond, time.Minute} {
		h.observe(d)
	}
	// 0.5 ms and 1 ms in the first bucket (≤ 1 ms), 3 ms in ≤ 5 ms, a
	// minute in +Inf only (no bucket).
	want := [len(commitBuckets)]uint64{0: 2, 2: 1}
	if h.Counts != want || h.Count != 4 {
		t.Errorf("Histogram after 0.5ms, 1ms, 3ms, 1m: Counts %v, Count %d; want %v, 4", h.Counts, h.Count, want)
	}
	if s := 0.0005 + 0.001 + 0.003 + 60; h.Sum < s-1e-9 || h.Sum > s+1e-9 {
		t.Errorf("Histogram.Sum = %v; want %v", h.Sum, s)
	}
}

func TestEventCounts_Add(t *testing.T) {
	var n TypeCounts
	for _, typ := range []journal.EventType{journal.Added, journal.Added, journal.Deleted} {
		n.add(typ)
	}
	var c EventCounts
	c.add(journal.OriginWatch, n)
	c.add(journal.OriginRestart, TypeCounts{Modified: 1})
	c.add(journal.OriginRelist, n)
	want := EventCounts{Watch: n, Relist: n, Restart: TypeCounts{Modified: 1}}
	if n != (TypeCounts{Added: 2, Deleted: 1}) || c != want {
		t.Errorf("counts = %+v, %+v; want {Added:2 Deleted:1}, %+v", n, c, want)
	}
}
