package crsource

// The tracker decides how far the consumer may commit. Events are queued in
// offset order; each becomes an entry, open until a reconcile of its key
// that started after it was queued succeeds. The commit point is just
// before the oldest open entry (or the last queued offset when none is
// open). Entries for one key are closed together: the workqueue merges
// requests for a key, so one successful reconcile covers them all.

import (
	"sync"

	"sigs.k8s.io/controller-runtime/pkg/reconcile"
)

type entry struct {
	off  uint64
	done bool
}

// tracker is safe for concurrent use: the feeder adds, the controller's
// workers begin and succeed, the committer reads the point.
type tracker struct {
	mu    sync.Mutex
	fifo  []*entry // queued entries, oldest first, done ones popped from the front
	open  map[reconcile.Request][]*entry
	fed   uint64        // last offset queued
	full  bool          // the feeder waits for open entries to close (MaxPending)
	fedCh chan struct{} // closed and replaced when fed or full changes
	kick  chan struct{} // buffered 1: the commit point may have moved
	room  chan struct{} // closed and replaced when entries close
}

func newTracker(start uint64) *tracker {
	return &tracker{open: map[reconcile.Request][]*entry{}, fed: start,
		fedCh: make(chan struct{}), kick: make(chan struct{}, 1), room: make(chan struct{})}
}

// add records that the event at off was queued as req.
func (t *tracker) add(off uint64, req reconcile.Request) {
	t.mu.Lock()
	e := &entry{off: off}
	t.fifo = append(t.fifo, e)
	t.open[req] = append(t.open[req], e)
	t.mu.Unlock()
}

// fedTo records that every event up to off has been queued.
func (t *tracker) fedTo(off uint64) {
	t.mu.Lock()
	if off > t.fed {
		t.fed = off
		close(t.fedCh)
		t.fedCh = make(chan struct{})
	}
	t.mu.Unlock()
	t.poke()
}

// setFull records whether the feeder is waiting for room.
func (t *tracker) setFull(full bool) {
	t.mu.Lock()
	if full != t.full {
		t.full = full
		close(t.fedCh)
		t.fedCh = make(chan struct{})
	}
	t.mu.Unlock()
}

// fedState returns the last offset queued, whether the feeder waits for
// room, and a channel closed when either changes.
func (t *tracker) fedState() (uint64, bool, <-chan struct{}) {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.fed, t.full, t.fedCh
}

// openCount returns how many entries are open, and a channel closed when
// some close.
func (t *tracker) openCount() (int, <-chan struct{}) {
	t.mu.Lock()
	defer t.mu.Unlock()
	return len(t.fifo), t.room
}

// begin returns the newest offset queued for req: a success of the
// reconcile starting now covers the entries up to it.
func (t *tracker) begin(req reconcile.Request) uint64 {
	t.mu.Lock()
	defer t.mu.Unlock()
	es := t.open[req]
	if len(es) == 0 {
		return 0
	}
	return es[len(es)-1].off
}

// succeeded closes req's entries up to offset upto.
func (t *tracker) succeeded(req reconcile.Request, upto uint64) {
	if upto == 0 {
		return
	}
	t.mu.Lock()
	es := t.open[req]
	n := 0
	for n < len(es) && es[n].off <= upto {
		es[n].done = true
		n++
	}
	if n == len(es) {
		delete(t.open, req)
	} else {
		t.open[req] = es[n:]
	}
	for len(t.fifo) > 0 && t.fifo[0].done {
		t.fifo[0] = nil
		t.fifo = t.fifo[1:]
	}
	close(t.room)
	t.room = make(chan struct{})
	t.mu.Unlock()
	t.poke()
}

// point returns the offset the consumer may commit.
func (t *tracker) point() uint64 {
	t.mu.Lock()
	defer t.mu.Unlock()
	if len(t.fifo) == 0 {
		return t.fed
	}
	return t.fifo[0].off - 1
}

func (t *tracker) poke() {
	select {
	case t.kick <- struct{}{}:
	default:
	}
}
