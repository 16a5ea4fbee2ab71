package delivery

import (
	"context"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/controller/priorityqueue"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
)

// WaitRoom waits until fewer than max entries are open and returns how
// many more may be added; ok is false when ctx is done first. While it
// waits, FedState reports the feed as full.
func (t *Tracker) WaitRoom(ctx context.Context, max int) (room int, ok bool) {
	for {
		n, ch := t.OpenCount()
		if n < max {
			t.SetFull(false)
			return max - n, true
		}
		t.SetFull(true)
		select {
		case <-ch:
		case <-ctx.Done():
			return 0, false
		}
	}
}

// WaitSynced is a source's WaitForSync. It returns nil once the feed
// waits for room (MaxPending requests queued and not yet reconciled),
// whenever that happens: the controller starts the workers that make room
// only after WaitForSync returns, so waiting longer would never end (a
// replay of more objects than MaxPending, a follower far behind). Else it
// waits until synced is closed (the feed follows the journal: the source's
// own condition, its replay included) and then until every event up to
// head() is queued. It returns ctx's error when ctx is done first, and
// errf() when failed is closed first.
func (t *Tracker) WaitSynced(ctx context.Context, synced <-chan struct{}, head func() (uint64, error), failed <-chan struct{}, errf func() error) error {
	var h uint64
	for {
		fed, full, ch := t.FedState()
		if full {
			return nil
		}
		if synced == nil && fed >= h {
			return nil
		}
		select {
		case <-ch:
		case <-synced:
			var err error
			if h, err = head(); err != nil {
				return err
			}
			synced = nil // from here on: until fed reaches h
		case <-failed:
			return errf()
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// timersSaveInterval is how often CommitLoop writes timers that changed
// without a commit (a periodic reconcile moving its own due time): the
// file is always written before a commit, and at most this often besides.
// A timer not yet written fires earlier after a restart (its older due
// time) or once more (a cleared one), never later.
const timersSaveInterval = 10 * time.Second

// CommitLoop commits t's point whenever it moves, coalescing bursts into
// one write, until ctx is done; then once more when final. Before each
// commit it saves timers (nil: none), so that the file holds the timer of
// every request whose events the commit passes; a failed save holds the
// commit back and is tried again a second later. Timers that changed
// without a commit are saved every 10 s (timersSaveInterval). committed is the
// consumer's committed offset at start; errors for which ignore is true
// (a closed journal) are not logged.
func CommitLoop(ctx context.Context, t *Tracker, committed uint64, timers *Timers, commit func(uint64) error,
	ignore func(error) bool, log logr.Logger, final bool) {
	var retry <-chan time.Time
	save := func() bool {
		if timers == nil {
			return true
		}
		if err := timers.Save(); err != nil {
			log.Error(err, "saving the requeue timers failed; the commit waits for them")
			retry = time.After(time.Second)
			return false
		}
		return true
	}
	step := func() {
		retry = nil
		p := t.Point()
		if p <= committed {
			return
		}
		if !save() {
			return
		}
		if err := commit(p); err != nil {
			if !ignore(err) {
				log.Error(err, "commit failed", "offset", p)
			}
			return
		}
		committed = p
	}
	var tick <-chan time.Time
	if timers != nil {
		tk := time.NewTicker(timersSaveInterval)
		defer tk.Stop()
		tick = tk.C
	}
	for {
		select {
		case <-t.Kick():
			step()
		case <-retry:
			step()
		case <-tick:
			save()
		case <-ctx.Done():
			if final {
				save()
				step()
			}
			return
		}
	}
}

// Queue wraps a controller's queue: every request added through it (Add,
// AddAfter, AddRateLimited, and a priority queue's AddWithOpts) is
// recorded on the tracker at the offset last given to SetOffset, the
// event being dispatched. A priority queue stays one (handlers give the
// initial list low priority through it).
type Queue struct {
	q   workqueue.TypedRateLimitingInterface[reconcile.Request]
	t   *Tracker
	off atomic.Uint64
}

// NewQueue returns a Queue adding to q and recording on t.
func NewQueue(q workqueue.TypedRateLimitingInterface[reconcile.Request], t *Tracker) *Queue {
	return &Queue{q: q, t: t}
}

// SetOffset sets the offset the next requests are recorded at.
func (q *Queue) SetOffset(off uint64) { q.off.Store(off) }

// Interface returns the queue to give the handler: q's own interfaces,
// with the additions recorded.
func (q *Queue) Interface() workqueue.TypedRateLimitingInterface[reconcile.Request] {
	tq := trackQ{TypedRateLimitingInterface: q.q, q: q}
	if pq, ok := q.q.(priorityqueue.PriorityQueue[reconcile.Request]); ok {
		return trackPQ{trackQ: tq, pq: pq}
	}
	return tq
}

type trackQ struct {
	workqueue.TypedRateLimitingInterface[reconcile.Request]
	q *Queue
}

func (w trackQ) track(req reconcile.Request) { w.q.t.Add(w.q.off.Load(), req) }

func (w trackQ) Add(req reconcile.Request) {
	w.track(req)
	w.TypedRateLimitingInterface.Add(req)
}

func (w trackQ) AddAfter(req reconcile.Request, d time.Duration) {
	w.track(req)
	w.TypedRateLimitingInterface.AddAfter(req, d)
}

func (w trackQ) AddRateLimited(req reconcile.Request) {
	w.track(req)
	w.TypedRateLimitingInterface.AddRateLimited(req)
}

type trackPQ struct {
	trackQ
	pq priorityqueue.PriorityQueue[reconcile.Request]
}

func (w trackPQ) AddWithOpts(o priorityqueue.AddOpts, items ...reconcile.Request) {
	for _, req := range items {
		w.track(req)
	}
	w.pq.AddWithOpts(o, items...)
}

func (w trackPQ) GetWithPriority() (reconcile.Request, int, bool) { return w.pq.GetWithPriority() }
