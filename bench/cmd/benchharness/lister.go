package main

// The readers: journal/cache's Reader (over a reconcile.Loop
// into a file that keeps objects) against the informer lister's Get and
// List + DeepCopy, each in a child process of its own at every N, after
// the subjects; readerTable's text says what they read. Both watch the
// ConfigMaps of all namespaces, among them listNS, created once before the
// first N, so that both List the same 1,000 objects whatever N is.

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"runtime"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	coreinformers "k8s.io/client-go/informers/core/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	listersv1 "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/rest"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/watchjournal/watchjournal/journal/cache"
	"github.com/watchjournal/watchjournal/reconcile"
)

// Reader kinds: child processes of their own, not subjects.
const (
	readerJournal  = "reader-journal"
	readerInformer = "reader-informer"
)

const (
	listNS    = "bench-list" // the namespace both readers List
	listN     = 1000         // ConfigMaps in listNS
	readGets  = 20000        // Gets timed, each on its own
	readLists = 30           // Lists timed
)

// readerStats is what a reader child measured, in its "reads" report.
type readerStats struct {
	Objects int     `json:"objects"` // objects the reader holds (all namespaces)
	GetP50  float64 `json:"getP50Seconds"`
	GetP99  float64 `json:"getP99Seconds"`
	ListP50 float64 `json:"listP50Seconds"` // median List of listNS
	Listed  int     `json:"listed"`         // items each List returned
	After   memory  `json:"after"`          // steady, after the reads
}

// readerRow is one reader's results at one N.
type readerRow struct {
	N      int         `json:"n"`
	Kind   string      `json:"kind"`
	Err    string      `json:"err,omitempty"`
	Synced report      `json:"synced"`
	Reads  readerStats `json:"reads"`
}

// isReader reports whether a child kind is one of the readers.
func isReader(kind string) bool { return kind == readerJournal || kind == readerInformer }

// readers runs both reader children at N=n, the first time after
// creating listNS and its listN ConfigMaps.
func (p *parent) readers(ctx context.Context, n int, res *results) {
	if len(res.readers) == 0 {
		err := p.createNamespaces(ctx, listNS)
		if err == nil {
			_, err = p.createRange(ctx, "ConfigMaps in "+listNS+" for the readers' List", new(int), listN, func(ctx context.Context, i int) error {
				return p.createConfigMap(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name(i), Namespace: listNS}, Data: map[string]string{"payload": strings.Repeat("0", payloadSize)}})
			})
		}
		if err != nil {
			for _, k := range []string{readerJournal, readerInformer} {
				res.readers = append(res.readers, readerRow{N: n, Kind: k, Err: err.Error()})
			}
			return
		}
	}
	for _, k := range []string{readerJournal, readerInformer} {
		r := readerRow{N: n, Kind: k}
		if err := p.reader(&r); err != nil {
			r.Err = err.Error()
			logf("N=%d %s: %s", n, k, r.Err)
		}
		res.readers = append(res.readers, r)
	}
}

func (p *parent) reader(r *readerRow) (err error) {
	dir, err := os.MkdirTemp("", "benchharness-"+r.Kind+"-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	logf("N=%d %s: starting", r.N, r.Kind)
	// Straight to the apiserver: no proxy, no relist forced.
	c, err := p.startChild(r.N, r.Kind, p.cp.RESTConfig().Host, dir)
	if err != nil {
		return err
	}
	defer func() { c.stop(err) }()
	if r.Synced, err = c.await("synced", syncTimeout(r.N)+time.Minute); err != nil {
		return err
	}
	x, err := c.await("reads", 10*time.Minute)
	if err != nil || x.Reader == nil {
		return fmt.Errorf("reads: %v (report %+v)", err, x)
	}
	r.Reads = *x.Reader
	logf("N=%d %s: heap %s (after reads %s), Get p50 %.1f µs p99 %.1f µs, List of %d %.2f ms", r.N, r.Kind,
		mib(r.Synced.Steady.HeapInuse), mib(r.Reads.After.HeapInuse), 1e6*r.Reads.GetP50, 1e6*r.Reads.GetP99, r.Reads.Listed, 1e3*r.Reads.ListP50)
	return c.exit(time.Minute)
}

// readerFuncs are one reader's Get (of a name in benchNS) and List (of
// listNS, returning the number of items).
type readerFuncs struct {
	get     func(ctx context.Context, name string) error
	list    func(ctx context.Context) (int, error)
	objects func() int
	close   func()
}

// readerChildMain runs a reader child: sync, report, read, report, wait
// for exit.
func readerChildMain(kind string, n int, cfg *rest.Config, send func(report)) error {
	ctx := context.Background()
	base := steady()
	began, cpu0 := time.Now(), cpuTime()
	sctx, cancel := context.WithTimeout(ctx, syncTimeout(n+listN))
	var rf readerFuncs
	var err error
	switch kind {
	case readerJournal:
		rf, err = syncJournalReader(sctx, cfg, os.Getenv(envDir))
	default:
		rf, err = syncInformerReader(sctx, cfg)
	}
	cancel()
	if err != nil {
		return err
	}
	defer rf.close()
	took, cpu := time.Since(began), cpuTime()-cpu0
	send(report{Event: "synced", Base: base, Steady: steady(), SyncSeconds: took.Seconds(), SyncCPU: cpu.Seconds()})

	st := readerStats{Objects: rf.objects()}
	prof := profiler{dir: os.Getenv(envPprof), tag: os.Getenv(envTag)}
	stopCPU := prof.cpu("cpu-gets")
	rng := rand.New(rand.NewPCG(uint64(n), 11))
	gets := make([]time.Duration, 0, readGets)
	for range readGets {
		nm := name(rng.IntN(n))
		t0 := time.Now()
		if err := rf.get(ctx, nm); err != nil {
			return fmt.Errorf("get %s/%s: %w", benchNS, nm, err)
		}
		gets = append(gets, time.Since(t0))
	}
	stopCPU()
	runtime.GC()
	stopCPU = prof.cpu("cpu-lists")
	lists := make([]time.Duration, 0, readLists)
	for range readLists {
		t0 := time.Now()
		k, err := rf.list(ctx)
		if err != nil {
			return fmt.Errorf("list %s: %w", listNS, err)
		}
		lists = append(lists, time.Since(t0))
		if st.Listed = k; k != listN {
			return fmt.Errorf("list %s: %d items; want %d", listNS, k, listN)
		}
	}
	stopCPU()
	slices.Sort(gets)
	slices.Sort(lists)
	st.GetP50 = gets[len(gets)/2].Seconds()
	st.GetP99 = gets[len(gets)*99/100].Seconds()
	st.ListP50 = lists[len(lists)/2].Seconds()
	st.After = steady()
	send(report{Event: "reads", Reader: &st})
	if awaitExit() {
		send(report{Event: "bye"})
	}
	return nil
}

// syncJournalReader runs watchjournal's loop over all namespaces'
// ConfigMaps into a file that keeps objects, until its initial list is
// committed.
func syncJournalReader(ctx context.Context, cfg *rest.Config, dir string) (readerFuncs, error) {
	w, err := newWatchjournal(subjWatchjournal, cfg, metav1.NamespaceAll, dir, 0)
	if err != nil {
		return readerFuncs{}, err
	}
	r := cache.NewReader(w.j, scheme.Scheme) // keeps objects from the first list on
	w.run()
	if err := w.loop.WaitFor(ctx, func(st reconcile.Status) bool { return st.Lists >= 1 }); err != nil {
		w.close()
		return readerFuncs{}, fmt.Errorf("journal reader: waiting for the initial list: %w (status %+v)", err, w.loop.Status())
	}
	return readerFuncs{
		get: func(ctx context.Context, name string) error {
			var cm corev1.ConfigMap
			return r.Get(ctx, client.ObjectKey{Namespace: benchNS, Name: name}, &cm)
		},
		list: func(ctx context.Context) (int, error) {
			var l corev1.ConfigMapList
			err := r.List(ctx, &l, client.InNamespace(listNS))
			return len(l.Items), err
		},
		objects: func() int {
			st, _ := w.j.Stats()
			return int(st.Objects)
		},
		close: w.close,
	}, nil
}

// syncInformerReader runs a typed ConfigMap informer over all namespaces
// (with the namespace index, as controller-runtime's cache has) until it
// has synced.
func syncInformerReader(ctx context.Context, cfg *rest.Config) (readerFuncs, error) {
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return readerFuncs{}, err
	}
	inf := coreinformers.NewConfigMapInformer(cs, metav1.NamespaceAll, 0,
		toolscache.Indexers{toolscache.NamespaceIndex: toolscache.MetaNamespaceIndexFunc})
	var bg background
	bg.start(inf.RunWithContext)
	stop := bg.stop
	if !toolscache.WaitForCacheSync(ctx.Done(), inf.HasSynced) {
		stop()
		return readerFuncs{}, fmt.Errorf("informer reader: not synced: %w", ctx.Err())
	}
	l := listersv1.NewConfigMapLister(inf.GetIndexer())
	return readerFuncs{
		get: func(_ context.Context, name string) error {
			cm, err := l.ConfigMaps(benchNS).Get(name)
			if err == nil {
				_ = cm.DeepCopy()
			}
			return err
		},
		list: func(context.Context) (int, error) {
			items, err := l.ConfigMaps(listNS).List(labels.Everything())
			out := make([]corev1.ConfigMap, 0, len(items))
			for _, cm := range items {
				out = append(out, *cm.DeepCopy())
			}
			return len(out), err
		},
		objects: func() int { return len(inf.GetStore().ListKeys()) },
		close:   stop,
	}, nil
}

// findReader returns the reader's row at n, unless it failed.
func (r *results) findReader(n int, kind string) (readerRow, bool) {
	return first(r.readers, func(x readerRow) bool { return x.N == n && x.Kind == kind && x.Err == "" })
}

// readerTargets evaluates the readers' targets on this run's readers and the
// in-process append benchmarks.
func (r *results) readerTargets() []target {
	var ts []target
	ns := r.o.ns
	for _, n := range ns {
		jr, ok1 := r.findReader(n, readerJournal)
		ir, ok2 := r.findReader(n, readerInformer)
		t := newTarget("journal + cache.Reader (objects kept) steady heap ≤ 5%% of the informer's (all namespaces: N=%d + %d in %s)", n, listN, listNS)
		if ok1 && ok2 {
			a, b := max(jr.Synced.Steady.HeapInuse, jr.Reads.After.HeapInuse), ir.Synced.Steady.HeapInuse
			t.set(float64(a) <= 0.05*float64(b), fmt.Sprintf("%s / %s MiB = %.1f%% (larger of synced and after the reads)", mb(a), mb(b), 100*float64(a)/float64(b)))
		}
		ts = append(ts, t)
		t = newTarget("Reader.Get of one typed object ≤ 2× the informer lister's Get + DeepCopy, p50 (N=%d)", n)
		if ok1 && ok2 {
			t.set(jr.Reads.GetP50 <= 2*ir.Reads.GetP50, fmt.Sprintf("p50 %.1f / %.1f µs = %.1f×; p99 %.1f / %.1f µs = %.1f× (%d Gets each)",
				1e6*jr.Reads.GetP50, 1e6*ir.Reads.GetP50, jr.Reads.GetP50/ir.Reads.GetP50,
				1e6*jr.Reads.GetP99, 1e6*ir.Reads.GetP99, jr.Reads.GetP99/ir.Reads.GetP99, readGets))
		}
		ts = append(ts, t)
		t = newTarget("Reader.List of a namespace of %d ≤ 3× the lister's List + DeepCopy (N=%d)", listN, n)
		if ok1 && ok2 {
			t.set(jr.Reads.ListP50 <= 3*ir.Reads.ListP50, fmt.Sprintf("%.2f / %.2f ms = %.1f× (median of %d)", 1e3*jr.Reads.ListP50, 1e3*ir.Reads.ListP50, jr.Reads.ListP50/ir.Reads.ListP50, readLists))
		}
		ts = append(ts, t)
	}
	lo, hi := ns[0], ns[len(ns)-1]
	t := newTarget("journal + cache.Reader heap flat in N: heap at N=%d ≤ 1.25× heap at N=%d", hi, lo)
	a, ok1 := r.findReader(lo, readerJournal)
	b, ok2 := r.findReader(hi, readerJournal)
	if ok1 && ok2 && lo != hi {
		ha := max(a.Synced.Steady.HeapInuse, a.Reads.After.HeapInuse)
		hb := max(b.Synced.Steady.HeapInuse, b.Reads.After.HeapInuse)
		t.set(float64(hb) <= 1.25*float64(ha), fmt.Sprintf("%s / %s MiB = %.2f×", mb(hb), mb(ha), float64(hb)/float64(ha)))
	}
	ts = append(ts, t)
	gb := parseGobench(r.gobench)
	t = newTarget("keeping objects costs ≤ 20%% of the append rate (BenchmarkJournalAppend batch=1000/nosync vs …/nosync/objects)")
	none, ok1 := gb["BenchmarkJournalAppend/batch=1000/nosync"]["events/s"]
	kept, ok2 := gb["BenchmarkJournalAppend/batch=1000/nosync/objects"]["events/s"]
	if ok1 && ok2 && kept > 0 {
		extra := none/kept - 1
		t.set(extra <= 0.20, fmt.Sprintf("%.0f events/s without, %.0f with objects: %+.0f%% cost", none, kept, 100*extra))
	}
	return append(ts, t)
}

// readerTable returns the readers' results as a Markdown table.
func (r *results) readerTable() string {
	if len(r.readers) == 0 {
		return ""
	}
	var b strings.Builder
	fmt.Fprintf(&b, "\nReaders (journal/cache's Reader against the informer's lister; bench/cmd/benchharness/lister.go): ConfigMaps of all namespaces (N in %s, %d in %s, a few elsewhere), one child each; heap as above; Get of a random typed ConfigMap of %s (%d times: Reader.Get against the informer lister's Get + DeepCopy), List of %s (median of %d: Reader.List against the lister's List + DeepCopy of each item).\n",
		benchNS, listN, listNS, benchNS, readGets, listNS, readLists)
	b.WriteString("\n| N | reader | objects | sync s | heap MiB | heap after reads MiB | Get p50 µs | Get p99 µs | List of 1,000 ms |\n|--:|---|--:|--:|--:|--:|--:|--:|--:|\n")
	for _, x := range r.readers {
		if x.Err != "" {
			fmt.Fprintf(&b, "| %d | %s | error: %s |||||||\n", x.N, x.Kind, cell(x.Err))
			continue
		}
		fmt.Fprintf(&b, "| %d | %s | %d | %s | %s | %s | %.1f | %.1f | %.2f |\n", x.N, x.Kind, x.Reads.Objects, secs(x.Synced.SyncSeconds),
			mb(x.Synced.Steady.HeapInuse), mb(x.Reads.After.HeapInuse), 1e6*x.Reads.GetP50, 1e6*x.Reads.GetP99, 1e3*x.Reads.ListP50)
	}
	return b.String()
}
