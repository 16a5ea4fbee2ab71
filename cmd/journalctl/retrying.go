package main

// Saying that a watch is still retrying. The loop logs the first failure
// of a kind at Error and its repeats only at V(1), and discovery at watch
// start logs each distinct error once: with the apiserver down the watch
// would go silent after one line. So while a failure lasts the CLI logs,
// at most every settings.stillRetryingEvery, one info line with the error, since
// when and how many backoffs, and one "recovered" line when it clears.

import (
	"context"
	"fmt"
	"time"

	"go.uber.org/zap"

	"github.com/watchjournal/watchjournal/reconcile"
)

// retrying follows one failure: since when it lasts, and when it was last
// reported.
type retrying struct {
	since, reported time.Time // zero: not failing
	// every is the least interval between two "still retrying" lines of
	// one failure (settings.stillRetryingEvery).
	every time.Duration
}

// fail notes a failure at now and logs "still retrying: <err>, since
// <time>, N backoffs" when r.every has passed since the failure
// began or was last reported.
func (r *retrying) fail(log *zap.Logger, err error, backoffs int, now time.Time) {
	if r.since.IsZero() {
		r.since, r.reported = now, now
		return
	}
	if now.Sub(r.reported) < r.every {
		return
	}
	r.reported = now
	log.Info(fmt.Sprintf("still retrying: %v, since %s, %d backoffs", err, r.since.Format(time.RFC3339), backoffs))
}

// recover logs one "recovered" line when a failure was under way.
func (r *retrying) recover(log *zap.Logger, now time.Time) {
	if r.since.IsZero() {
		return
	}
	log.Info("recovered", zap.Duration("after", now.Sub(r.since).Round(time.Millisecond)))
	*r = retrying{every: r.every}
}

// reportRetrying logs, while loop's Status.LastError is set, a "still
// retrying" line at most every every, and "recovered" when it clears,
// until ctx is done.
func reportRetrying(ctx context.Context, loop *reconcile.Loop, log *zap.Logger, every time.Duration) {
	r := retrying{every: every}
	for ctx.Err() == nil {
		st := loop.Status()
		if st.LastError == nil {
			r.recover(log, time.Now())
			_ = loop.WaitFor(ctx, func(st reconcile.Status) bool { return st.LastError != nil })
			continue
		}
		r.fail(log, st.LastError, st.Backoffs, time.Now())
		wctx, cancel := context.WithTimeout(ctx, time.Until(r.reported.Add(r.every)))
		_ = loop.WaitFor(wctx, func(st reconcile.Status) bool { return st.LastError == nil })
		cancel()
	}
}
