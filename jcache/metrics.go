package jcache

// Metrics of a cache's journals: one Prometheus collector for every
// journal file the cache has open, found at each scrape, so that the
// informers a controller adds later (GetInformer, Watches, a new kind read
// through the client) are covered without registering each:
//
//	err = jcache.RegisterMetrics(ctrlmetrics.Registry, mgr.GetCache())
//
// Each file's series are package metrics' (metrics.NewCollectorFunc over
// the file's journal and the reconcile.Loop that writes it at the scrape:
// a ranged file's loop is replaced at each range change, feedrange.go),
// labeled resource (the journal's Resource, metrics.ResourceLabel), as
// metrics.Register labels them; so a registry may hold a cache's
// collector beside journals registered with metrics.Register, as long as
// no journal is in both (duplicate series fail the scrape). The collector
// is unchecked (Describe sends nothing): the set of files changes while
// it runs.

import (
	"errors"
	"fmt"
	"path/filepath"
	"sort"
	"sync"

	"github.com/prometheus/client_golang/prometheus"
	crcache "sigs.k8s.io/controller-runtime/pkg/cache"

	"github.com/watchjournal/watchjournal/metrics"
)

// ErrNotJCache is returned by NewCollector and RegisterMetrics for a cache
// not made by New or NewFunc.
var ErrNotJCache = errors.New("jcache: the cache is not a journal cache (jcache.New or jcache.NewFunc)")

// Collector is a prometheus.Collector of every journal file a cache has
// open (package metrics' series per file, labeled resource). Create it
// with NewCollector; RegisterMetrics registers one.
type Collector struct {
	dir string

	mu   sync.Mutex
	cols map[*feed]prometheus.Collector // per open feed, kept so that scrape_errors_total counts across scrapes
}

// NewCollector returns a collector of the journal files of c, which must
// be a cache made by New or NewFunc (mgr.GetCache() of a manager built
// with NewCache: jcache.NewFunc(...)); otherwise ErrNotJCache.
func NewCollector(c crcache.Cache) (*Collector, error) {
	jc, ok := c.(*Cache)
	if !ok {
		return nil, fmt.Errorf("%w: %T", ErrNotJCache, c)
	}
	return &Collector{dir: filepath.Clean(jc.dir), cols: map[*feed]prometheus.Collector{}}, nil
}

// RegisterMetrics registers NewCollector(c) on reg (controller-runtime's
// metrics.Registry, to be served on the manager's metrics endpoint). It
// fails with ErrNotJCache, or with reg's error.
func RegisterMetrics(reg prometheus.Registerer, c crcache.Cache) error {
	col, err := NewCollector(c)
	if err != nil {
		return err
	}
	return reg.Register(col)
}

// Describe sends nothing: the collector is unchecked, its files change.
func (c *Collector) Describe(chan<- *prometheus.Desc) {}

// Collect sends the metrics of each journal file of the cache whose loop
// is running, in the order of their paths.
func (c *Collector) Collect(ch chan<- prometheus.Metric) {
	for _, col := range c.collectors() {
		col.Collect(ch)
	}
}

// collectors returns a collector per running feed in the cache's
// directory, and forgets those of feeds that closed.
func (c *Collector) collectors() []prometheus.Collector {
	registry.mu.Lock()
	var feeds []*feed
	for path, f := range registry.feeds {
		if f.running && f.refs > 0 && filepath.Dir(path) == c.dir {
			feeds = append(feeds, f)
		}
	}
	registry.mu.Unlock()
	sort.Slice(feeds, func(a, b int) bool { return feeds[a].path < feeds[b].path })

	c.mu.Lock()
	defer c.mu.Unlock()
	live := make(map[*feed]prometheus.Collector, len(feeds))
	out := make([]prometheus.Collector, 0, len(feeds))
	for _, f := range feeds {
		col, ok := c.cols[f]
		if !ok {
			col = prometheus.WrapCollectorWith(prometheus.Labels{metrics.ResourceLabel: f.res.String()}, metrics.NewCollectorFunc(f.j, f.loop))
		}
		live[f] = col
		out = append(out, col)
	}
	c.cols = live
	return out
}
