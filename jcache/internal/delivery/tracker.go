// Package delivery is the restart-exact bookkeeping of jcache's Exact
// sources (controller-runtime sources): which queued reconcile.Request
// came from which journal offset, how far a consumer may commit, the
// durable RequeueAfter timers, and the reconciler wrapper that reports
// each reconcile's outcome to them.
//
// It is internal because it is plumbing: operators meet its rules through
// the sources' documentation (jcache/exact.go, docs/exact.md).
//
// # Tracker
//
// Events are queued in offset order; each request an event queues becomes
// an entry, open until a reconcile of its key that started after it was
// queued completes (Completes). The commit point is just before the oldest
// open entry (or the last offset fed when none is open). Entries for one
// key are closed together: the workqueue merges requests for a key, so one
// completed reconcile covers them all.
//
// Room (MaxPending) counts open entries only: a request that keeps failing
// holds the commit point, not the feed, so the other keys go on being
// reconciled, as with controller-runtime's own sources. Closed entries
// behind an open one are dropped once they outnumber the open ones, so
// memory stays proportional to the open entries.
package delivery

import (
	"sync"

	"sigs.k8s.io/controller-runtime/pkg/reconcile"
)

type entry struct {
	off  uint64
	done bool
}

// Tracker is safe for concurrent use: the feeder adds, the controller's
// workers begin and succeed, the committer reads the point.
type Tracker struct {
	mu    sync.Mutex
	gen   uint64   // Reset count
	fifo  []*entry // queued entries, oldest first, done ones popped from the front (and dropped by compact)
	nopen int      // entries in fifo not done
	open  map[reconcile.Request][]*entry
	fed   uint64        // last offset queued
	full  bool          // the feeder waits for open entries to close (MaxPending)
	fedCh chan struct{} // closed and replaced when fed or full changes
	kick  chan struct{} // buffered 1: the commit point may have moved
	room  chan struct{} // closed and replaced when entries close
}

// NewTracker returns a tracker whose commit point is start until entries
// are added (the consumer's committed offset).
func NewTracker(start uint64) *Tracker {
	return &Tracker{open: map[reconcile.Request][]*entry{}, fed: start,
		fedCh: make(chan struct{}), kick: make(chan struct{}, 1), room: make(chan struct{})}
}

// Add records that the event at offset off was queued as req. Offsets
// are added in non-decreasing order.
func (t *Tracker) Add(off uint64, req reconcile.Request) {
	t.mu.Lock()
	e := &entry{off: off}
	t.fifo = append(t.fifo, e)
	t.nopen++
	t.open[req] = append(t.open[req], e)
	t.mu.Unlock()
}

// FedTo records that every event up to offset off has been queued.
func (t *Tracker) FedTo(off uint64) {
	t.mu.Lock()
	if off > t.fed {
		t.fed = off
		close(t.fedCh)
		t.fedCh = make(chan struct{})
	}
	t.mu.Unlock()
	t.Poke()
}

// SetFull records whether the feeder is waiting for room.
func (t *Tracker) SetFull(full bool) {
	t.mu.Lock()
	if full != t.full {
		t.full = full
		close(t.fedCh)
		t.fedCh = make(chan struct{})
	}
	t.mu.Unlock()
}

// FedState returns the last offset queued, whether the feeder waits for
// room, and a channel closed when either changes.
func (t *Tracker) FedState() (uint64, bool, <-chan struct{}) {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.fed, t.full, t.fedCh
}

// OpenCount returns how many entries are open, and a channel closed when
// some close.
func (t *Tracker) OpenCount() (int, <-chan struct{}) {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.nopen, t.room
}

// Mark is what a reconcile covers: the entries of its request up to an
// offset, queued before the last Reset (a generation) or after it.
type Mark struct {
	gen uint64
	off uint64 // 0: none
}

// Begin returns the newest entry queued for req: a completed reconcile
// starting now covers the entries up to it.
func (t *Tracker) Begin(req reconcile.Request) Mark {
	t.mu.Lock()
	defer t.mu.Unlock()
	es := t.open[req]
	if len(es) == 0 {
		return Mark{gen: t.gen}
	}
	return Mark{gen: t.gen, off: es[len(es)-1].off}
}

// Succeeded closes req's entries up to m (Begin's answer). A mark from
// before a Reset closes nothing: that reconcile began before the replay
// queued the request again.
func (t *Tracker) Succeeded(req reconcile.Request, m Mark) {
	if m.off == 0 {
		return
	}
	upto := m.off
	t.mu.Lock()
	if m.gen != t.gen {
		t.mu.Unlock()
		return
	}
	es := t.open[req]
	n := 0
	for n < len(es) && es[n].off <= upto {
		es[n].done = true
		t.nopen--
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
	t.compact()
	close(t.room)
	t.room = make(chan struct{})
	t.mu.Unlock()
	t.Poke()
}

// compact drops the closed entries behind an open one when they are most
// of fifo (and more than a few): amortized constant time per entry. The
// order of the open ones, and so the front, stays.
func (t *Tracker) compact() {
	if len(t.fifo) < 32 || t.nopen*2 > len(t.fifo) {
		return
	}
	kept := make([]*entry, 0, t.nopen)
	for _, e := range t.fifo {
		if !e.done {
			kept = append(kept, e)
		}
	}
	t.fifo = kept
}

// Point returns the offset the consumer may commit.
func (t *Tracker) Point() uint64 {
	t.mu.Lock()
	defer t.mu.Unlock()
	if len(t.fifo) == 0 {
		return t.fed
	}
	return t.fifo[0].off - 1
}

// Kick returns a channel that receives when the commit point may have
// moved.
func (t *Tracker) Kick() <-chan struct{} { return t.kick }

// Poke wakes the committer.
func (t *Tracker) Poke() {
	select {
	case t.kick <- struct{}{}:
	default:
	}
}

// Reset forgets every entry and sets the last offset fed to fed: for a
// feed that starts over (a replay of every key after retention passed the
// consumer, which queues every key again). Requests already queued
// reconcile as usual; they close nothing.
func (t *Tracker) Reset(fed uint64) {
	t.mu.Lock()
	t.gen++
	t.fifo = nil
	t.nopen = 0
	t.open = map[reconcile.Request][]*entry{}
	t.fed = fed
	close(t.fedCh)
	t.fedCh = make(chan struct{})
	close(t.room)
	t.room = make(chan struct{})
	t.mu.Unlock()
}
