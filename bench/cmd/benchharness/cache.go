package main

// The cache subjects: an operator process, a
// controller-runtime manager with one controller whose reconciler reads
// the object it was given through mgr.GetClient(), on controller-runtime's
// cache (crcache) or on jcache, started twice on one directory, a process
// each: a first start (then the reads) and a restart with nothing changed.
// What it watches and what is measured: cacheSection's notes
// (cache_results.go).

import (
	"context"
	"fmt"
	"io/fs"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	crcache "sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	ctrlreconcile "sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/watchjournal/watchjournal/jcache"
)

// The cache subjects.
const (
	subjCRCache = "crcache"
	subjJCache  = "jcache"
)

// cacheSubjects are the subjects run on the cache subjects' ConfigMaps:
// by runCacheSubject, and jcache-sharded by runSharded (sharded.go).
var cacheSubjects = []string{subjCRCache, subjJCache, subjJCacheExact, subjJCacheTransform, subjJCacheSharded}

// isCache reports whether a subject is one of the cache subjects.
func isCache(kind string) bool { return slices.Contains(cacheSubjects, kind) }

// The cache subjects' objects.
const (
	cacheNamespaces = 100          // namespaces cache-00 .. cache-99
	cacheListNS     = "cache-list" // the namespace of the full List
	cacheListN      = 1000         // ConfigMaps in cacheListNS
	cacheGroupSize  = 100          // objects sharing one group label value
	cacheLabel      = "bench.watchjournal.io/cache"
	groupLabel      = "bench.watchjournal.io/group"
	groupIndex      = "group" // the field index's name
	cacheGets       = 20000   // Gets timed
	cacheIndexLists = 500     // Lists through the index timed
	cacheNSLists    = 30      // Lists of cacheListNS timed
	envCachePhase   = "BENCH_CACHE_PHASE"
)

func cacheNS(i int) string { return fmt.Sprintf("cache-%02d", i%cacheNamespaces) }

func group(i int) string { return fmt.Sprintf("g%05d", i/cacheGroupSize) }

// cacheObject is ConfigMap i of the N (ns = "") or of cacheListNS.
func cacheObject(i int, ns string) *corev1.ConfigMap {
	g := group(i)
	if ns == "" {
		ns = cacheNS(i)
	} else {
		g = "list-" + g
	}
	return &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: name(i), Namespace: ns, Labels: map[string]string{cacheLabel: "true", groupLabel: g}},
		Data:       map[string]string{"payload": payload},
	}
}

// createCacheObjects creates the namespaces and cacheListNS's objects the
// first time, and the cache subjects' ConfigMaps p.cacheCreated .. n-1.
func (p *parent) createCacheObjects(ctx context.Context, n int) (creation, error) {
	if p.cacheCreated == 0 {
		var nss []string
		for i := range cacheNamespaces {
			nss = append(nss, cacheNS(i))
		}
		if err := p.createNamespaces(ctx, append(nss, cacheListNS)...); err != nil {
			return creation{}, err
		}
		_, err := p.createRange(ctx, "ConfigMaps in "+cacheListNS, new(int), cacheListN, func(ctx context.Context, i int) error {
			return p.createConfigMap(ctx, cacheObject(i, cacheListNS))
		})
		if err != nil {
			return creation{}, err
		}
	}
	return p.createRange(ctx, fmt.Sprintf("ConfigMaps in %d namespaces", cacheNamespaces), &p.cacheCreated, n, func(ctx context.Context, i int) error {
		return p.createConfigMap(ctx, cacheObject(i, ""))
	})
}

// cacheStart is what one process of a cache subject measured.
type cacheStart struct {
	// FirstReconcileSeconds is from the parent's exec of the process to
	// the reconciler's first call; InProcessSeconds from the child's
	// ctrl.NewManager call to the same.
	FirstReconcileSeconds float64 `json:"firstReconcileSeconds"`
	InProcessSeconds      float64 `json:"inProcessSeconds"`
	// SyncedSeconds is from the parent's exec until the informer's
	// HasSynced was seen true (polled every 5 ms): crcache, its store
	// holds the list; jcache, its journal is current with the server,
	// before the replay of the stored objects to the controller's handler
	// (the handler's own HasSynced, which the controller waits for) may
	// have ended. 0: not seen.
	SyncedSeconds float64 `json:"syncedSeconds"`
	// ReadySeconds (jcache-exact) is from the parent's exec until the
	// Exact source's WaitForSync returned: the controller's workers run
	// from then on; 0 for the other subjects.
	ReadySeconds float64 `json:"readySeconds,omitempty"`
	// AllSeconds is from the parent's exec until every object was
	// reconciled once (the queue the start filled has drained; an Exact
	// restart: until the source was idle, cache_exact.go); CPU the
	// process's CPU time (user + system) until then. FirstReconcileSeconds
	// is 0 when nothing was reconciled (an Exact restart).
	AllSeconds float64 `json:"allSeconds"`
	CPU        float64 `json:"cpuSeconds"`
	Reconciles int64   `json:"reconciles"`
	// Base is the steady memory before the manager was built; Steady once
	// every object was reconciled.
	Base   memory `json:"base"`
	Steady memory `json:"steady"`
	// DiskBytes is the size of the cache's directory after the process
	// exited (jcache: its journal files).
	DiskBytes int64 `json:"diskBytes,omitempty"`
}

// cacheReads is what the reads through mgr.GetClient() measured.
type cacheReads struct {
	GetP50      float64 `json:"getP50Seconds"`
	GetP99      float64 `json:"getP99Seconds"`
	IndexP50    float64 `json:"indexListP50Seconds"`
	IndexP99    float64 `json:"indexListP99Seconds"`
	IndexListed int     `json:"indexListed"`
	NSListP50   float64 `json:"nsListP50Seconds"`
	NSListed    int     `json:"nsListed"`
	// After is the steady memory after the reads.
	After memory `json:"after"`
	// Fresh is the freshness measured after them (freshness.go); nil
	// for a workload's objects.
	Fresh *freshness `json:"fresh,omitempty"`
}

// cacheReport is a cache child's report ("cache-synced" or "cache-reads").
type cacheReport struct {
	NewManagerUnixNano     int64      `json:"newManagerUnixNano,omitempty"`
	FirstReconcileUnixNano int64      `json:"firstReconcileUnixNano,omitempty"`
	SyncedUnixNano         int64      `json:"syncedUnixNano,omitempty"` // the informer's HasSynced (0: not seen)
	ReadyUnixNano          int64      `json:"readyUnixNano,omitempty"`  // the Exact source's WaitForSync returned (0: not Exact)
	AllUnixNano            int64      `json:"allUnixNano,omitempty"`
	CPU                    float64    `json:"cpuSeconds,omitempty"`
	Reconciles             int64      `json:"reconciles,omitempty"`
	Base                   memory     `json:"base"`
	Steady                 memory     `json:"steady"`
	Reads                  cacheReads `json:"reads"`
}

// cacheRow is one cache subject's results at one N.
type cacheRow struct {
	N       int    `json:"n"`
	Subject string `json:"subject"`
	Err     string `json:"err,omitempty"`
	Objects int    `json:"objects"` // N + cacheListN (a workload's: N)
	// Workload is the workload (workload.go); empty for the ConfigMaps.
	Workload string     `json:"workload,omitempty"`
	Load     string     `json:"load"` // 1-minute load average at the first start
	First    cacheStart `json:"first"`
	Restart  cacheStart `json:"restart"`
	Reads    cacheReads `json:"reads"`
}

// runCacheSubject runs a cache subject's first start (with the reads) and
// its restart, each in a child of its own, on one directory.
func (p *parent) runCacheSubject(ctx context.Context, n int, kind string) cacheRow {
	r := cacheRow{N: n, Subject: kind, Objects: n + cacheListN}
	if p.wl != nil {
		r.Objects, r.Workload = n, p.wl.name
	}
	dir, err := os.MkdirTemp("", "benchharness-"+kind+"-")
	if err != nil {
		r.Err = err.Error()
		return r
	}
	defer os.RemoveAll(dir)
	if b, err := os.ReadFile("/proc/loadavg"); err == nil && len(strings.Fields(string(b))) > 0 {
		r.Load = strings.Fields(string(b))[0]
	}
	for _, phase := range []string{"first", "restart"} {
		st, reads, err := p.cacheProcess(n, kind, dir, phase)
		if err != nil {
			r.Err = fmt.Sprintf("%s start: %v", phase, err)
			logf("N=%d %s: %s", n, kind, r.Err)
			return r
		}
		if phase == "first" {
			r.First, r.Reads = st, reads
		} else {
			r.Restart = st
		}
	}
	return r
}

// cacheProcess runs one process of a cache subject: until every object
// was reconciled, then (first start) the reads, then exit.
func (p *parent) cacheProcess(n int, kind, dir, phase string) (st cacheStart, reads cacheReads, err error) {
	logf("N=%d %s: %s start", n, kind, phase)
	began := time.Now()
	// Straight to the apiserver: no proxy, no relist forced.
	tag := fmt.Sprintf("N%d-%s-%s", n, kind, phase)
	if p.wl != nil {
		tag = p.wl.name + "-" + tag // as startChild's, so workloads do not overwrite each other's profiles
	}
	c, err := p.startChild(n, kind, p.cp.RESTConfig().Host, dir, envCachePhase+"="+phase, envTag+"="+tag)
	if err != nil {
		return st, reads, err
	}
	defer func() { c.stop(err) }()
	x, err := c.await("cache-synced", syncTimeout(n)+3*time.Minute)
	if err != nil || x.Cache == nil {
		return st, reads, fmt.Errorf("waiting for the reconciles: %v", err)
	}
	cr := x.Cache
	st = cacheStart{
		FirstReconcileSeconds: time.Unix(0, cr.FirstReconcileUnixNano).Sub(began).Seconds(),
		InProcessSeconds:      time.Duration(cr.FirstReconcileUnixNano - cr.NewManagerUnixNano).Seconds(),
		AllSeconds:            time.Unix(0, cr.AllUnixNano).Sub(began).Seconds(),
		SyncedSeconds:         time.Unix(0, cr.SyncedUnixNano).Sub(began).Seconds(),
		CPU:                   cr.CPU, Reconciles: cr.Reconciles, Base: cr.Base, Steady: cr.Steady,
	}
	if cr.SyncedUnixNano == 0 {
		st.SyncedSeconds = 0
	}
	if cr.FirstReconcileUnixNano == 0 {
		st.FirstReconcileSeconds, st.InProcessSeconds = 0, 0
	}
	if cr.ReadyUnixNano != 0 {
		st.ReadySeconds = time.Unix(0, cr.ReadyUnixNano).Sub(began).Seconds()
	}
	logf("N=%d %s: %s start: informer synced %.2f s, first reconcile %.2f s after exec (%.2f s after NewManager), all %d reconciled %.2f s (CPU %.2f s), heap %s, RSS %s",
		n, kind, phase, st.SyncedSeconds, st.FirstReconcileSeconds, st.InProcessSeconds, st.Reconciles, st.AllSeconds, st.CPU,
		mib(st.Steady.HeapInuse), mib(st.Steady.RSS))
	if phase == "first" {
		x, err := c.await("cache-reads", 10*time.Minute)
		if err != nil || x.Cache == nil {
			return st, reads, fmt.Errorf("reads: %v", err)
		}
		reads = x.Cache.Reads
		logf("N=%d %s: Get p50 %.1f µs p99 %.1f µs; List through the index (%d) p50 %.2f ms p99 %.2f ms; List of %s (%d) %.2f ms; heap after %s",
			n, kind, 1e6*reads.GetP50, 1e6*reads.GetP99, reads.IndexListed, 1e3*reads.IndexP50, 1e3*reads.IndexP99,
			cacheListNS, reads.NSListed, 1e3*reads.NSListP50, mib(reads.After.HeapInuse))
		if f := reads.Fresh; f != nil {
			logf("N=%d %s: event to handler p50 %.3f ms p99 %.3f ms (%d early); own write to Get p50 %.3f ms p99 %.3f ms",
				n, kind, 1e3*f.EventP50, 1e3*f.EventP99, f.Early, 1e3*f.GetP50, 1e3*f.GetP99)
		}
	}
	if err := c.exit(2 * time.Minute); err != nil {
		return st, reads, err
	}
	st.DiskBytes = dirSize(dir)
	return st, reads, nil
}

// dirSize returns the bytes of the regular files under dir.
func dirSize(dir string) int64 {
	var total int64
	_ = filepath.WalkDir(dir, func(_ string, d fs.DirEntry, err error) error {
		if err == nil && d.Type().IsRegular() {
			if fi, err := d.Info(); err == nil {
				total += fi.Size()
			}
		}
		return nil
	})
	return total
}

// countingReconciler is the operator's reconciler: it reads the object it
// was given through the manager's client and counts the reconciles.
type countingReconciler struct {
	c      client.Client
	newObj func() client.Object
	want   int64
	n      atomic.Int64
	first  atomic.Int64  // UnixNano of the first call
	all    chan struct{} // closed once want objects were reconciled
}

func (r *countingReconciler) Reconcile(ctx context.Context, req ctrlreconcile.Request) (ctrlreconcile.Result, error) {
	r.first.CompareAndSwap(0, time.Now().UnixNano())
	if err := r.c.Get(ctx, req.NamespacedName, r.newObj()); err != nil {
		return ctrlreconcile.Result{}, client.IgnoreNotFound(err)
	}
	if r.n.Add(1) == r.want {
		close(r.all)
	}
	return ctrlreconcile.Result{}, nil
}

// errorSink is a logr.LogSink that writes errors to stderr and drops the
// rest (controller-runtime's start-up chatter).
type errorSink struct{ name string }

func (errorSink) Init(logr.RuntimeInfo)            {}
func (errorSink) Enabled(int) bool                 { return false }
func (errorSink) Info(int, string, ...any)         {}
func (s errorSink) WithValues(...any) logr.LogSink { return s }
func (s errorSink) WithName(n string) logr.LogSink {
	return errorSink{name: strings.TrimPrefix(s.name+"/"+n, "/")}
}
func (s errorSink) Error(err error, msg string, kv ...any) {
	fmt.Fprintf(os.Stderr, "%s benchharness child %s: %s: %v %v\n", time.Now().Format("15:04:05"), s.name, msg, err, kv)
}

// cacheChildMain runs a cache subject's process: the manager, the
// controller, the reads on a first start, exit when told.
func cacheChildMain(kind string, n int, cfg *rest.Config, send func(report)) error {
	prof := profiler{dir: os.Getenv(envPprof), tag: os.Getenv(envTag)}
	ctrl.SetLogger(logr.New(errorSink{}))
	base := steady()
	k := cacheKindOf(childWorkload(), n)

	stopCPU := prof.cpu("cpu-start")
	cpu0 := cpuTime()
	newManager := time.Now()
	var newCache crcache.NewCacheFunc
	switch kind {
	case subjCRCache:
		newCache = crcache.New
	case subjJCache, subjJCacheExact, subjJCacheTransform:
		jo := jcache.Options{Dir: os.Getenv(envDir)}
		if k.sealed { // Secrets: kept sealed, with a key file as a mounted Secret gives it
			keyFile := filepath.Clean(os.Getenv(envDir)) + ".key"
			if err := os.WriteFile(keyFile, benchKey(), 0o600); err != nil {
				return err
			}
			defer os.Remove(keyFile)
			jo.KeyFiles, jo.SecretPayloads = []string{keyFile}, true
		}
		newCache = jcache.NewFunc(jo)
	default:
		return fmt.Errorf("unknown cache subject %q", kind)
	}
	co := crcache.Options{DefaultLabelSelector: k.selector}
	if kind == subjJCacheTransform {
		co.DefaultTransform = crcache.TransformStripManagedFields()
	}
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{
		Scheme:   scheme.Scheme,
		NewCache: newCache,
		Cache:    co,
		// Reads of unstructured objects (the custom resource) from the
		// cache too, not from the apiserver (controller-runtime's default).
		Client:                 client.Options{Cache: &client.CacheOptions{Unstructured: true}},
		Metrics:                metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0",
	})
	if err != nil {
		return err
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	err = mgr.GetFieldIndexer().IndexField(ctx, k.newObj(), groupIndex, func(o client.Object) []string {
		if g, ok := o.GetLabels()[groupLabel]; ok {
			return []string{g}
		}
		return nil
	})
	if err != nil {
		return err
	}
	rec := &countingReconciler{c: mgr.GetClient(), newObj: k.newObj, want: int64(k.want), all: make(chan struct{})}
	b := ctrl.NewControllerManagedBy(mgr).Named("bench")
	var exact *exactSource
	if kind == subjJCacheExact {
		var ex *jcache.ExactController
		exact, ex = newExactSource(mgr.GetCache(), k)
		err = b.WatchesRawSource(exact).Complete(ex.Reconciler(rec))
	} else {
		err = b.For(k.newObj()).Complete(rec)
	}
	if err != nil {
		return err
	}
	stopped := make(chan error, 1)
	go func() { stopped <- mgr.Start(ctx) }()
	// Every object reconciled once; Exact's restart: the source idle, as
	// it delivers nothing when nothing changed (cache_exact.go).
	all := (<-chan struct{})(rec.all)
	if exact != nil && os.Getenv(envCachePhase) == "restart" {
		all = exact.idle(ctx)
	}
	// When the informer (the one the controller watches) says it has
	// synced: crcache, its store holds the list; jcache, the journal is
	// current with the server (the replay to the handler may still run).
	var syncedAt atomic.Int64
	go func() {
		inf, err := mgr.GetCache().GetInformer(ctx, k.newObj(), crcache.BlockUntilSynced(false))
		if err != nil {
			return
		}
		if wait.PollUntilContextCancel(ctx, 5*time.Millisecond, true, func(context.Context) (bool, error) { return inf.HasSynced(), nil }) == nil {
			syncedAt.Store(time.Now().UnixNano())
		}
	}()
	timeout := time.After(syncTimeout(n) + 2*time.Minute)
	select {
	case <-all:
	case err := <-stopped:
		return fmt.Errorf("manager stopped: %v", err)
	case <-timeout:
		return fmt.Errorf("%d of %d objects reconciled after %v", rec.n.Load(), rec.want, syncTimeout(n)+2*time.Minute)
	}
	allAt, cpu := time.Now(), cpuTime()-cpu0
	stopCPU()
	st := steady()
	prof.heap("heap-steady")
	send(report{Event: "cache-synced", Cache: &cacheReport{
		NewManagerUnixNano: newManager.UnixNano(), FirstReconcileUnixNano: rec.first.Load(), AllUnixNano: allAt.UnixNano(), SyncedUnixNano: syncedAt.Load(),
		ReadyUnixNano: exactReady(exact), CPU: cpu.Seconds(), Reconciles: rec.n.Load(), Base: base, Steady: st,
	}})

	if os.Getenv(envCachePhase) == "first" {
		stopCPU := prof.cpu("cpu-reads")
		reads, err := cacheReadsOf(ctx, mgr.GetClient(), n, k)
		stopCPU()
		if err != nil {
			return err
		}
		if childWorkload() == nil {
			if reads.Fresh, err = freshnessOf(ctx, mgr, kind); err != nil {
				return err
			}
		}
		send(report{Event: "cache-reads", Cache: &cacheReport{Reads: reads}})
	}

	awaitExit() // or the parent closing stdin
	cancel()
	if err := awaitManagerStop(stopped); err != nil { // the manager stops the cache: jcache closes its files
		return err
	}
	send(report{Event: "bye"})
	return nil
}

// awaitManagerStop waits up to a minute for the manager's Start, whose
// context was cancelled, to return on stopped; it returns Start's error
// wrapped, or an error saying the manager did not stop.
func awaitManagerStop(stopped <-chan error) error {
	select {
	case err := <-stopped:
		if err != nil {
			return fmt.Errorf("manager: %w", err)
		}
		return nil
	case <-time.After(time.Minute):
		return fmt.Errorf("the manager did not stop within a minute")
	}
}

// cacheReadsOf times the reads through the manager's client c.
func cacheReadsOf(ctx context.Context, c client.Client, n int, k cacheKind) (cacheReads, error) {
	var st cacheReads
	rng := rand.New(rand.NewPCG(uint64(n), 23))
	gets := make([]time.Duration, 0, cacheGets)
	for range cacheGets {
		i := rng.IntN(n)
		obj := k.newObj()
		t0 := time.Now()
		err := c.Get(ctx, client.ObjectKey{Namespace: k.nsOf(i), Name: name(i)}, obj)
		gets = append(gets, time.Since(t0))
		if err != nil {
			return st, fmt.Errorf("get %s/%s: %w", k.nsOf(i), name(i), err)
		}
	}
	groups := max(1, n/cacheGroupSize)
	idx := make([]time.Duration, 0, cacheIndexLists)
	for range cacheIndexLists {
		g := group(rng.IntN(groups) * cacheGroupSize)
		l := k.newList()
		t0 := time.Now()
		err := c.List(ctx, l, client.MatchingFields{groupIndex: g})
		idx = append(idx, time.Since(t0))
		if err != nil {
			return st, fmt.Errorf("list %s=%s: %w", groupIndex, g, err)
		}
		if want := min(n, cacheGroupSize); meta.LenList(l) != want {
			return st, fmt.Errorf("list %s=%s: %d items; want %d", groupIndex, g, meta.LenList(l), want)
		}
		st.IndexListed = meta.LenList(l)
	}
	lists := make([]time.Duration, 0, cacheNSLists)
	for i := 0; k.listNS && i < cacheNSLists; i++ { // a workload's objects: no namespace of cacheListN
		var l corev1.ConfigMapList
		t0 := time.Now()
		err := c.List(ctx, &l, client.InNamespace(cacheListNS))
		lists = append(lists, time.Since(t0))
		if err != nil {
			return st, fmt.Errorf("list %s: %w", cacheListNS, err)
		}
		if len(l.Items) != cacheListN {
			return st, fmt.Errorf("list %s: %d items; want %d", cacheListNS, len(l.Items), cacheListN)
		}
		st.NSListed = len(l.Items)
	}
	for _, d := range [][]time.Duration{gets, idx, lists} {
		slices.Sort(d)
	}
	st.GetP50, st.GetP99 = gets[len(gets)/2].Seconds(), gets[len(gets)*99/100].Seconds()
	st.IndexP50, st.IndexP99 = idx[len(idx)/2].Seconds(), idx[len(idx)*99/100].Seconds()
	if len(lists) > 0 {
		st.NSListP50 = lists[len(lists)/2].Seconds()
	}
	st.After = steady()
	return st, nil
}

// cacheKind is what a cache subject's process watches and reads: the
// ConfigMaps of cacheObject, or a workload's objects (workload.go: typed
// Pods and Secrets, unstructured widgets), selected by their label.
type cacheKind struct {
	newObj   func() client.Object
	newList  func() client.ObjectList
	nsOf     func(i int) string
	selector labels.Selector
	// want is how many objects the cache holds; listNS whether they
	// include cacheListNS's (the List of a namespace); sealed whether
	// jcache keeps them sealed (Secrets).
	want   int
	listNS bool
	sealed bool
}

func cacheKindOf(w *workload, n int) cacheKind {
	if w == nil {
		return cacheKind{
			newObj: func() client.Object { return &corev1.ConfigMap{} }, newList: func() client.ObjectList { return &corev1.ConfigMapList{} },
			nsOf: cacheNS, selector: labels.SelectorFromSet(labels.Set{cacheLabel: "true"}), want: n + cacheListN, listNS: true,
		}
	}
	k := cacheKind{nsOf: w.nsOf, selector: labels.SelectorFromSet(labels.Set{workloadLabel: w.name}), want: n, sealed: w.sealed}
	switch w.name {
	case wlPods:
		k.newObj, k.newList = func() client.Object { return &corev1.Pod{} }, func() client.ObjectList { return &corev1.PodList{} }
	case wlSecrets:
		k.newObj, k.newList = func() client.Object { return &corev1.Secret{} }, func() client.ObjectList { return &corev1.SecretList{} }
	default: // the custom resource: unstructured
		gvk := w.gvr.GroupVersion().WithKind("Widget")
		k.newObj = func() client.Object { u := &unstructured.Unstructured{}; u.SetGroupVersionKind(gvk); return u }
		k.newList = func() client.ObjectList {
			l := &unstructured.UnstructuredList{}
			l.SetGroupVersionKind(gvk.GroupVersion().WithKind("WidgetList"))
			return l
		}
	}
	return k
}
