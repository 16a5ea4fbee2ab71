package delivery

import (
	"context"
	"fmt"
	"testing"
	"time"
)

// Ensure one request that never reconciles holds the commit point but not
// the room: entries reconciled after it do not count against MaxPending
// (WaitRoom), and are not kept in memory without bound.
func TestTracker_StuckEntryHoldsPointNotRoom(t *testing.T) {
	tr := NewTracker(0)
	tr.Add(1, req("bad"))
	tr.FedTo(1)
	for i := 2; i <= 1000; i++ {
		r := req(fmt.Sprintf("k%d", i))
		tr.Add(uint64(i), r)
		tr.FedTo(uint64(i))
		tr.Succeeded(r, tr.Begin(r))
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		room, ok := tr.WaitRoom(ctx, 3)
		cancel()
		if !ok || room != 2 {
			t.Fatalf("after %d entries reconciled behind a stuck one: WaitRoom(3) = %d, %v; want 2, true (one open)", i-1, room, ok)
		}
	}
	if p := tr.Point(); p != 0 {
		t.Fatalf("Point = %d; want 0 (bad, at offset 1, is open)", p)
	}
	tr.mu.Lock()
	kept := len(tr.fifo)
	tr.mu.Unlock()
	if kept > 64 {
		t.Errorf("%d entries kept for 1 open; want closed entries behind a stuck one dropped", kept)
	}
	tr.Succeeded(req("bad"), tr.Begin(req("bad")))
	if p := tr.Point(); p != 1000 {
		t.Fatalf("Point after bad reconciled = %d; want 1000", p)
	}
}
