// Package metrics exports a journal's and its reconcile loop's state as
// Prometheus metrics (github.com/prometheus/client_golang).
//
// It is a pull collector: nothing is counted on the loop's hot path by this
// package. At each scrape it reads reconcile.Loop.Status (a copy under the
// loop's lock), journal.Journal.Stats and journal.Consumers.List (one bbolt read
// transaction each), and turns them into const metrics. Register it on any
// prometheus.Registerer, controller-runtime's metrics.Registry included:
//
//	if err := metrics.Register(ctrlmetrics.Registry, j, loop); err != nil { ... }
//
// Names follow the Prometheus conventions (https://prometheus.io/docs/practices/naming/):
// the prefix watchjournal_, base units (seconds, bytes), _total on
// counters. Counters count from the Loop's creation.
//
// Every series carries the label resource (ResourceLabel: the journal's
// Resource in its String form, such as "configmaps.v1 -n wj"), so that one
// registry takes any number of journals, registered at any time: the
// second journal's collector has the same metric names and label names as
// the first's, only another resource value. Alert rules and dashboards
// (deploy/monitoring) aggregate or select by it.
package metrics

import (
	"errors"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/watchjournal/watchjournal/journal"
	"github.com/watchjournal/watchjournal/reconcile"
)

const ns = "watchjournal"

func desc(name, help string, labels ...string) *prometheus.Desc {
	return prometheus.NewDesc(prometheus.BuildFQName(ns, "", name), help, labels, nil)
}

// The metrics, by source.
var (
	// Loop (reconcile.Status).
	eventsDesc       = desc("events_total", "Events journaled by the loop, by type (ADDED, MODIFIED, DELETED) and origin (watch, relist, restart).", "type", "origin")
	listsDesc        = desc("lists_total", "Lists completed, by cause: initial (empty journal), gone (410 or rewound server while running), restart (410 when resuming after a process restart), verify (anti-entropy); expired_continue counts lists started again after their continue token expired.", "cause")
	backoffsDesc     = desc("backoffs_total", "Waits after a failed request, by reason: 403, 404, 429, 5xx, network, other.", "reason")
	syncedByDesc     = desc("synced_by", "1 for what proved the journal current (list, current, caught up, served: reconcile.Status.SyncedBy) once synced.", "by")
	syncedDesc       = desc("synced", "1 once the journal is known current with the server (HasSynced), else 0.")
	phaseDesc        = desc("phase", "1 for the loop's current phase, 0 for the others.", "phase")
	commitDesc       = desc("commit_duration_seconds", "Latency of the loop's journal commits (a watch batch, or a relist's commit).")
	listProgressDesc = desc("current_list_objects", "Objects received so far by the current (or last) list.")
	listModeDesc     = desc("list_mode", "1 for how the loop lists now (streaming: sendInitialEvents, KEP-3157; paginated: limit/continue), 0 for the other.", "mode")

	// Journal (Stats, Consumers).
	headDesc     = desc("journal_head_offset", "Offset of the newest event in the journal (0: none).")
	firstDesc    = desc("journal_first_offset", "Offset of the oldest retained event (0: none).")
	fileDesc     = desc("file_size_bytes", "Size of the journal's bbolt file on disk.")
	journalDesc  = desc("journal_size_bytes", "Size of the retained events as stored.")
	objectsDesc  = desc("index_objects", "Objects in the journal's index (the resource's current state).")
	lagDesc      = desc("consumer_lag_events", "Events after a durable consumer's committed offset, up to the head.", "consumer")
	consumerDesc = desc("consumer_committed_offset", "A durable consumer's committed offset.", "consumer")
)

// loopCounters are the loop's counters of one Status field each, without
// labels.
var loopCounters = []struct {
	desc *prometheus.Desc
	get  func(reconcile.Status) int64
}{
	{desc("gone_total", "410 Gone (resourceVersion too old, etcd compaction) answers met by watches and lists."), func(s reconcile.Status) int64 { return int64(s.Gone) }},
	{desc("list_pages_total", "List pages received."), func(s reconcile.Status) int64 { return int64(s.PagesTotal) }},
	{desc("list_objects_total", "Objects in the list pages received."), func(s reconcile.Status) int64 { return int64(s.ObjectsListed) }},
	{desc("list_bytes_total", "Bytes of list response bodies read (pages that decoded)."), func(s reconcile.Status) int64 { return s.ListBytes }},
	{desc("watches_total", "Watch requests that opened (connects and reconnects)."), func(s reconcile.Status) int64 { return int64(s.Watches) }},
	{desc("watch_idle_restarts_total", "Watches replaced after receiving nothing for the idle timeout."), func(s reconcile.Status) int64 { return int64(s.IdleRestarts) }},
	{desc("throttled_total", "Backoffs the apiserver asked for (429, or a Retry-After)."), func(s reconcile.Status) int64 { return int64(s.Throttled) }},
	{desc("verifies_total", "Anti-entropy verifies (relists of a healthy watch)."), func(s reconcile.Status) int64 { return int64(s.Verifies) }},
	{desc("divergences_total", "Events found by verify that the watch had lost."), func(s reconcile.Status) int64 { return int64(s.Divergences) }},
	{desc("rewinds_total", "Times the server's resourceVersion went below the journal's (etcd restored from a backup)."), func(s reconcile.Status) int64 { return int64(s.Rewinds) }},
	{desc("replays_total", "Watches the server replayed from scratch, ignoring the resume's resourceVersion; each relists."), func(s reconcile.Status) int64 { return int64(s.Replays) }},
	{desc("requests_total", "HTTP requests sent to the apiserver: list pages, streaming lists, watches, resume checks (reconcile.Status.Requests)."), func(s reconcile.Status) int64 { return s.Requests }},
	{desc("received_bytes_total", "Bytes of apiserver response bodies read, watches included, after transport decompression (reconcile.Status.BytesReceived)."), func(s reconcile.Status) int64 { return s.BytesReceived }},
}

var phases = []reconcile.Phase{reconcile.PhaseStarting, reconcile.PhaseListing, reconcile.PhaseConnecting,
	reconcile.PhaseWatching, reconcile.PhaseBackoff, reconcile.PhaseStopped}

// Collector is a prometheus.Collector of one journal and, optionally, the
// loop that writes it. Create it with NewCollector or NewCollectorFunc.
type Collector struct {
	j    *journal.Journal
	loop func() *reconcile.Loop // the loop writing j now; nil: none ever
	errs prometheus.Counter
}

// NewCollector returns a collector of j and l. l may be nil (a journal
// written by another process, or none): only the journal's metrics are
// exported then. j may not be nil.
func NewCollector(j *journal.Journal, l *reconcile.Loop) *Collector {
	if l == nil {
		return NewCollectorFunc(j, nil)
	}
	return NewCollectorFunc(j, func() *reconcile.Loop { return l })
}

// NewCollectorFunc returns a collector of j and of the loop that writes j
// at each scrape, for a journal whose writer stops one loop and starts
// another over its life (a shard member's file, whose loop is replaced at
// each range change). loop is called once per Collect and returns the
// loop writing j then, or nil while none does (only the journal's metrics
// are exported for that scrape); loop nil is NewCollector(j, nil). The
// loop's counters are those of the loop returned: they start again from
// zero when the loop is replaced, which Prometheus's rate and increase
// take as a counter reset. j may not be nil.
func NewCollectorFunc(j *journal.Journal, loop func() *reconcile.Loop) *Collector {
	return &Collector{j: j, loop: loop, errs: prometheus.NewCounter(prometheus.CounterOpts{
		Namespace: ns, Name: "scrape_errors_total",
		Help: "Scrapes that could not read the journal (its stats are then missing).",
	})}
}

// Register registers a collector of j and l (l may be nil) on reg, with
// the const label resource="<j's Resource>" (ResourceLabel; the Resource's
// String form, such as "configmaps.v1 -n wj" or "secrets.v1 -n wj
// --metadata-only") on every metric. Journals of other resources register
// on the same reg at any time, before or after its first scrape. A
// journal that records no resource is labeled resource="" (one such
// journal per registry). It fails with j.Resource's error and with reg's
// error: prometheus.AlreadyRegisteredError when a journal of the same
// resource is registered twice on reg.
func Register(reg prometheus.Registerer, j *journal.Journal, l *reconcile.Loop) error {
	res, ok, err := j.Resource()
	if err != nil {
		return err
	}
	label := ""
	if ok {
		label = res.String()
	}
	return prometheus.WrapRegistererWith(prometheus.Labels{ResourceLabel: label}, reg).Register(NewCollector(j, l))
}

// ResourceLabel is the label Register adds to every metric.
const ResourceLabel = "resource"

// RegisterResource is Register for a journal that must record its
// resource: it fails with an error when j records none. Register labels
// every metric with the resource too; RegisterResource adds the check
// that j records one.
func RegisterResource(reg prometheus.Registerer, j *journal.Journal, l *reconcile.Loop) error {
	if _, ok, err := j.Resource(); err != nil {
		return err
	} else if !ok {
		return errors.New("metrics: the journal records no resource to label its metrics with")
	}
	return Register(reg, j, l)
}

// Describe sends the descriptors of every metric Collect may send.
func (c *Collector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{headDesc, firstDesc, fileDesc, journalDesc, objectsDesc, lagDesc, consumerDesc, c.errs.Desc()} {
		ch <- d
	}
	if c.loop == nil {
		return
	}
	for _, d := range []*prometheus.Desc{eventsDesc, listsDesc, backoffsDesc, syncedDesc, syncedByDesc, phaseDesc,
		commitDesc, listProgressDesc, listModeDesc} {
		ch <- d
	}
	for _, m := range loopCounters {
		ch <- m.desc
	}
}

// Collect reads the loop's status and the journal's stats and sends them.
func (c *Collector) Collect(ch chan<- prometheus.Metric) {
	if c.loop != nil {
		if l := c.loop(); l != nil {
			collectLoop(ch, l.Status())
		}
	}
	st, err := c.j.Stats()
	var cons []journal.ConsumerInfo
	if err == nil {
		cons, err = c.j.Consumers().List()
	}
	if err != nil {
		c.errs.Inc()
		ch <- c.errs
		return
	}
	ch <- c.errs
	gauge(ch, headDesc, float64(st.LastOffset))
	gauge(ch, firstDesc, float64(st.FirstOffset))
	gauge(ch, fileDesc, float64(st.FileSize))
	gauge(ch, journalDesc, float64(st.JournalBytes))
	gauge(ch, objectsDesc, float64(st.Objects))
	for _, ci := range cons {
		gauge(ch, lagDesc, float64(ci.Lag), ci.Name)
		gauge(ch, consumerDesc, float64(ci.Committed), ci.Name)
	}
}

func collectLoop(ch chan<- prometheus.Metric, s reconcile.Status) {
	for _, o := range []struct {
		origin journal.Origin
		n      reconcile.TypeCounts
	}{{journal.OriginWatch, s.Journaled.Watch}, {journal.OriginRelist, s.Journaled.Relist}, {journal.OriginRestart, s.Journaled.Restart}} {
		counter(ch, eventsDesc, o.n.Added, string(journal.Added), string(o.origin))
		counter(ch, eventsDesc, o.n.Modified, string(journal.Modified), string(o.origin))
		counter(ch, eventsDesc, o.n.Deleted, string(journal.Deleted), string(o.origin))
	}
	counter(ch, listsDesc, s.ListsInitial, "initial")
	counter(ch, listsDesc, s.ListsGone, "gone")
	counter(ch, listsDesc, s.ListsRestart, "restart")
	counter(ch, listsDesc, s.ListsVerify, "verify")
	counter(ch, listsDesc, s.ListRestarts, "expired_continue")
	for _, m := range loopCounters {
		counter(ch, m.desc, m.get(s))
	}
	b := s.BackoffsByReason
	counter(ch, backoffsDesc, b.Forbidden, "403")
	counter(ch, backoffsDesc, b.NotFound, "404")
	counter(ch, backoffsDesc, b.Throttled, "429")
	counter(ch, backoffsDesc, b.Server, "5xx")
	counter(ch, backoffsDesc, b.Network, "network")
	counter(ch, backoffsDesc, b.Other, "other")
	synced := 0.0
	if s.Synced {
		synced = 1
		gauge(ch, syncedByDesc, 1, s.SyncedBy)
	}
	gauge(ch, syncedDesc, synced)
	oneHot(ch, phaseDesc, s.Phase, phases...)
	gauge(ch, listProgressDesc, float64(s.ListObjects))
	oneHot(ch, listModeDesc, s.ListMode, reconcile.ListModeStreaming, reconcile.ListModePaginated)
	h := s.CommitLatency
	buckets := make(map[float64]uint64, len(h.Counts))
	cum := uint64(0)
	for i, ub := range h.Bounds() {
		cum += h.Counts[i]
		buckets[ub] = cum
	}
	ch <- prometheus.MustNewConstHistogram(commitDesc, h.Count, h.Sum, buckets)
}

func counter[T int | int64](ch chan<- prometheus.Metric, d *prometheus.Desc, v T, labels ...string) {
	ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, float64(v), labels...)
}

func gauge(ch chan<- prometheus.Metric, d *prometheus.Desc, v float64, labels ...string) {
	ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, labels...)
}

// oneHot sends 1 for the label value is and 0 for the other values.
func oneHot[T ~string](ch chan<- prometheus.Metric, d *prometheus.Desc, is T, values ...T) {
	for _, v := range values {
		x := 0.0
		if v == is {
			x = 1
		}
		gauge(ch, d, x, string(v))
	}
}
