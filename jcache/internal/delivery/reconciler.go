package delivery

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/reconcile"
)

// Completes reports whether a reconcile that returned (res, err) completes
// the events of its request, and the RequeueAfter timer it asks for:
//
//   - (Result{}, nil): complete.
//   - (Result{RequeueAfter: d}, nil), d > 0: complete, timer d. As
//     controller-runtime reads it: done, look again in d (it forgets the
//     key's rate limit and adds it after d). A periodic check must not pin
//     the commit.
//   - (Result{Requeue: true}, nil), no RequeueAfter: not complete.
//     controller-runtime retries it rate-limited, as after an error: the
//     reconciler said it is not done.
//   - a reconcile.TerminalError: complete (controller-runtime does not
//     retry it either).
//   - any other error: not complete; the Result is ignored, as
//     controller-runtime ignores it.
func Completes(res reconcile.Result, err error) (done bool, after time.Duration) {
	if err != nil {
		return errors.Is(err, reconcile.TerminalError(nil)), 0
	}
	if res.RequeueAfter > 0 {
		return true, res.RequeueAfter
	}
	//nolint:staticcheck // Requeue is deprecated but still honoured by controller-runtime.
	return !res.Requeue, 0
}

// Outcomes reports each reconcile's outcome to the trackers of every
// source that feeds one controller and to its timers. Safe for concurrent
// use.
type Outcomes struct {
	timers  *Timers // nil: no durable timers
	now     func() time.Time
	wrapped atomic.Bool

	mu       sync.Mutex
	trackers []*Tracker
}

// NewOutcomes returns Outcomes recording RequeueAfter timers in timers
// (nil: none).
func NewOutcomes(timers *Timers) *Outcomes { return &Outcomes{timers: timers, now: time.Now} }

// Timers returns the timers given to NewOutcomes.
func (o *Outcomes) Timers() *Timers { return o.timers }

// AddTracker adds a source's tracker.
func (o *Outcomes) AddTracker(t *Tracker) {
	o.mu.Lock()
	o.trackers = append(o.trackers, t)
	o.mu.Unlock()
}

func (o *Outcomes) list() []*Tracker {
	o.mu.Lock()
	defer o.mu.Unlock()
	return append([]*Tracker(nil), o.trackers...)
}

// Wrapped reports whether Wrap was called.
func (o *Outcomes) Wrapped() bool { return o.wrapped.Load() }

// Wrap returns r reporting to o: before each reconcile it notes, on every
// tracker, the newest entry of the request; when the reconcile completes
// (Completes), those entries close. A RequeueAfter sets the request's
// timer; a completion without it clears the timer.
func (o *Outcomes) Wrap(r reconcile.Reconciler) reconcile.Reconciler {
	o.wrapped.Store(true)
	return reconcile.Func(func(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
		ts := o.list()
		upto := make([]Mark, len(ts))
		for i, t := range ts {
			upto[i] = t.Begin(req)
		}
		res, err := r.Reconcile(ctx, req)
		done, after := Completes(res, err)
		if !done {
			return res, err
		}
		if o.timers != nil {
			if after > 0 {
				o.timers.Set(req, o.now().Add(after))
			} else {
				o.timers.Clear(req)
			}
		}
		for i, t := range ts {
			t.Succeeded(req, upto[i])
		}
		return res, err
	})
}
