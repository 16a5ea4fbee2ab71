package reconcile

// The counters Status embeds (Counters), and how the loop counts them:
// which list is which cause, which failure which reason, and the list
// progress and commit latency. Package metrics turns them into Prometheus
// metrics at scrape time, so the loop pays one increment under its status
// lock, never a metrics library call; journalctl stats shows the list
// progress.

import (
	"slices"
	"time"

	"github.com/watchjournal/watchjournal/journal"
)

// Counters are the loop's counters by cause and its list progress;
// Status embeds them, so a user reads them as Status fields. All counts start at 0 when the Loop is
// created.
type Counters struct {
	// ListsInitial, ListsGone, ListsRestart and ListsVerify count completed
	// lists by cause: the first list of an empty journal; a relist after a
	// 410 (or a rewound server, Rewinds, or a watch replayed from scratch,
	// Replays) while running; a relist after a 410 (rewind, replay) met
	// when the process resumed a stored resourceVersion (its events have
	// origin restart); an anti-entropy verify (the one after a restart
	// included). They add up to Lists.
	// (Lists started again after an expired continue are ListRestarts.)
	ListsInitial, ListsGone, ListsRestart, ListsVerify int
	// ListPages and ListObjects are the progress of the current list, or of
	// the last one once it ended: pages received and objects in them
	// (metadata pages; a page fetched again in full counts once; a
	// streaming list counts its batches of up to PageSize objects as
	// pages). Both reset to 0 when a list (or a list started again) begins.
	ListPages, ListObjects int
	// PagesTotal and ObjectsListed count list pages and their objects over
	// the loop's life, across lists.
	PagesTotal, ObjectsListed int
	// ListBytes counts the bytes of list response bodies read over the
	// loop's life, as they came off the wire (after any transport
	// decompression): each page that decoded, pages fetched again in full
	// included, and a streaming list's initial events up to its last
	// batch. Pages that broke before their end are not counted.
	ListBytes int64
	// Requests counts the HTTP requests the loop sent to the apiserver
	// (list pages, streaming lists, watches, resume checks, a
	// metadata-only journal's kind lookup; not New's discovery, nor
	// requests that client-go's rate limiter held back), and
	// BytesReceived the bytes of their
	// response bodies read, watches included, as they came off the wire
	// (after any transport decompression). Both are read when Status is
	// called; their changes do not wake WaitFor.
	Requests, BytesReceived int64
	// BackoffsByReason counts Backoffs by the cause of the failure.
	BackoffsByReason BackoffReasons
	// Journaled counts Events by origin and type, once committed.
	Journaled EventCounts
	// CommitLatency is the distribution of the journal commits the loop
	// made (a watch batch, or a whole relist's commit).
	CommitLatency Histogram
}

// BackoffReasons counts backoffs by the failure's cause, as countBackoff
// (errors.go) tells them apart. The fields add up to
// Status.Backoffs.
type BackoffReasons struct {
	// Forbidden: 403. NotFound: 404 (the resource type does not exist).
	// Throttled: 429. Server: any other 5xx. Network: the apiserver could
	// not be reached or the connection broke. Other: anything else (a
	// full disk, an undecodable frame, a 4xx not named here).
	Forbidden, NotFound, Throttled, Server, Network, Other int
}

// EventCounts counts journaled events by origin.
type EventCounts struct {
	Watch, Relist, Restart TypeCounts
}

// TypeCounts counts journaled events by type.
type TypeCounts struct {
	Added, Modified, Deleted int
}

// commitBuckets are the upper bounds of CommitLatency's buckets, in
// seconds (Histogram.Bounds).
var commitBuckets = [len(Histogram{}.Counts)]float64{0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10}

// Histogram is a fixed-bucket latency histogram of 13 buckets from 1 ms
// to 10 s (Bounds).
type Histogram struct {
	// Counts[i] is the number of observations ≤ Bounds()[i] and above
	// the bound before it (not cumulative).
	Counts [13]uint64
	// Count is the number of observations; Sum their total, in seconds.
	Count uint64
	Sum   float64
}

// Bounds returns the upper bounds of the buckets, in seconds, as
// Prometheus histograms take them (the +Inf bucket is implied).
func (Histogram) Bounds() []float64 { return commitBuckets[:] }

// observe adds one observation of d.
func (h *Histogram) observe(d time.Duration) {
	s := d.Seconds()
	h.Count++
	h.Sum += s
	if i, _ := slices.BinarySearch(commitBuckets[:], s); i < len(commitBuckets) {
		h.Counts[i]++ // the first bound ≥ s
	}
}

// add counts one event of type t.
func (c *TypeCounts) add(t journal.EventType) {
	switch t {
	case journal.Added:
		c.Added++
	case journal.Modified:
		c.Modified++
	case journal.Deleted:
		c.Deleted++
	}
}

// add adds n's counts under origin o.
func (c *EventCounts) add(o journal.Origin, n TypeCounts) {
	t := &c.Relist
	switch o {
	case journal.OriginWatch:
		t = &c.Watch
	case journal.OriginRestart:
		t = &c.Restart
	}
	t.Added += n.Added
	t.Modified += n.Modified
	t.Deleted += n.Deleted
}

// countList counts a completed list by its cause (Counters).
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
		l.update(func(x *Status) { x.CommitLatency.observe(d) })
	}
}
