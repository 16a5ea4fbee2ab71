package loopmetrics_test

import (
	"testing"
	"time"

	"github.com/watchjournal/watchjournal/internal/loopmetrics"
	"github.com/watchjournal/watchjournal/journal"
)

func TestHistogram_Observe(t *testing.T) {
	var h loopmetrics.Histogram
	for _, d := range []time.Duration{500 * time.Microsecond, time.Millisecond, 3 * time.Millisecond, time.Minute} {
		h.Observe(d)
	}
	// 0.5 ms and 1 ms in the first bucket (≤ 1 ms), 3 ms in ≤ 5 ms, a
	// minute in +Inf only (no bucket).
	want := [len(loopmetrics.CommitBuckets)]uint64{0: 2, 2: 1}
	if h.Counts != want || h.Count != 4 {
		t.Errorf("Histogram after 0.5ms, 1ms, 3ms, 1m: Counts %v, Count %d; want %v, 4", h.Counts, h.Count, want)
	}
	if s := 0.0005 + 0.001 + 0.003 + 60; h.Sum < s-1e-9 || h.Sum > s+1e-9 {
		t.Errorf("Histogram.Sum = %v; want %v", h.Sum, s)
	}
}

func TestEventCounts_Add(t *testing.T) {
	var n loopmetrics.TypeCounts
	for _, typ := range []journal.EventType{journal.Added, journal.Added, journal.Deleted} {
		n.Add(typ)
	}
	var c loopmetrics.EventCounts
	c.Add(journal.OriginWatch, n)
	c.Add(journal.OriginRestart, loopmetrics.TypeCounts{Modified: 1})
	c.Add(journal.OriginRelist, n)
	want := loopmetrics.EventCounts{Watch: n, Relist: n, Restart: loopmetrics.TypeCounts{Modified: 1}}
	if n != (loopmetrics.TypeCounts{Added: 2, Deleted: 1}) || c != want {
		t.Errorf("counts = %+v, %+v; want {Added:2 Deleted:1}, %+v", n, c, want)
	}
}
