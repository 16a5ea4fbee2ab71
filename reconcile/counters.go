package reconcile

// How the loop counts, for the counters Status embeds
// (internal/loopmetrics.Counters: kept for package metrics, which reads
// them from Status at scrape time, and for progress, journalctl stats):
// which list is which cause, which failure which reason, and the list
// progress and commit latency.

import (
	"errors"
	"net"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	utilnet "k8s.io/apimachinery/pkg/util/net"

	"github.com/watchjournal/watchjournal/internal/loopmetrics"
	"github.com/watchjournal/watchjournal/journal"
)

// countBackoff counts one backoff after err in b.
func countBackoff(b *loopmetrics.BackoffReasons, err error) {
	var s apierrors.APIStatus
	switch {
	case isForbidden(err):
		b.Forbidden++
	case isNotFound(err):
		b.NotFound++
	case isThrottled(err):
		b.Throttled++
	case errors.As(err, &s) && s.Status().Code >= 500:
		b.Server++
	case errors.As(err, new(*net.OpError)) || utilnet.IsProbableEOF(err) || utilnet.IsTimeout(err):
		b.Network++
	default:
		b.Other++
	}
}

// countList counts a completed list by its cause (loopmetrics.Counters).
func (c *Status) countList(s stateList, initial bool) {
	switch {
	case s.verify:
		c.ListsVerify++
	case initial:
		c.ListsInitial++
	case s.origin == journal.OriginRestart:
		c.ListsRestart++
	default:
		c.ListsGone++
	}
}

// listBegins resets the list progress.
func (c *Status) listBegins() { c.ListPages, c.ListObjects = 0, 0 }

// listPage counts one page of n objects and size bytes of body.
func (c *Status) listPage(n int, size int64) {
	c.ListBytes += size
	c.ListPages++
	c.ListObjects += n
	c.PagesTotal++
	c.ObjectsListed += n
}

// committed records the latency of a commit that began at start, unless
// it failed (err).
func (l *Loop) committed(start time.Time, err error) {
	if err == nil {
		d := time.Since(start)
		l.update(func(x *Status) { x.CommitLatency.Observe(d) })
	}
}
