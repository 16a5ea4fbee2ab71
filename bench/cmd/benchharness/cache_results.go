package main

// The cache subjects' section of the results file (cache.go): its tables,
// their targets, and how a run of only those subjects rewrites that
// section and keeps the rest of the file.

import (
	"bytes"
	"fmt"
	"slices"
	"strings"
)

// The cache section's markers: a run of only the cache subjects replaces
// what is between them (inclusive) and nothing else.
const (
	cacheBegin = "<!-- cache subjects: begin (benchharness writes this section; a run of only crcache and jcache rewrites only it) -->"
	cacheEnd   = "<!-- cache subjects: end -->"
)

// spliceSection returns file with the section between the markers begin
// and end (inclusive) replaced by section; a file without one gets it
// before the hand-written part (or at its end).
func spliceSection(file []byte, begin, end, section string) []byte {
	if i := bytes.Index(file, []byte(begin)); i >= 0 {
		if j := bytes.Index(file[i:], []byte(end)); j >= 0 {
			k := i + j + len(end)
			if k < len(file) && file[k] == '\n' {
				k++
			}
			return append(append(append([]byte{}, file[:i]...), section...), file[k:]...)
		}
	}
	if i := bytes.Index(file, []byte(handWritten)); i >= 0 {
		return append(append(append([]byte{}, file[:i]...), section+"\n"...), file[i:]...)
	}
	return append(append([]byte{}, file...), "\n"+section...)
}

// oldSection returns file's section between the markers begin and end,
// markers included, with a newline after it; nil when it has none.
func oldSection(file []byte, begin, end string) []byte {
	i := bytes.Index(file, []byte(begin))
	if i < 0 {
		return nil
	}
	j := bytes.Index(file[i:], []byte(end))
	if j < 0 {
		return nil
	}
	return append(append([]byte{}, file[i:i+j+len(end)]...), '\n')
}

// findCache returns the cache subject's row at n of workload w ("" for
// the ConfigMaps), unless it failed.
func findCache(rows []cacheRow, w string, n int, subject string) (cacheRow, bool) {
	return first(rows, func(x cacheRow) bool { return x.Workload == w && x.N == n && x.Subject == subject && x.Err == "" })
}

// ratio formats a / b.
func ratio(a, b float64) string { return dash(b != 0, "%.2f×", a/b) }

// cacheTargets evaluates the cache targets on the cache subjects' rows.
func (r *results) cacheTargets() []target {
	var ts []target
	var ns []int
	for _, x := range r.caches {
		if len(ns) == 0 || ns[len(ns)-1] != x.N {
			ns = append(ns, x.N)
		}
	}
	if len(ns) == 0 {
		return nil
	}
	// The controller's queue keeps heap per object queued at start-up
	// (bench/queue_bench_test.go), in both subjects: shown beside.
	queuePerObject := parseGobench(r.gobench)["BenchmarkControllerQueueRetained/priorityqueue/N=200000"]["retained-B/obj"]
	lessQueue := func(heap uint64, objects int) string {
		q := uint64(queuePerObject * float64(objects))
		if queuePerObject == 0 || q >= heap {
			return ""
		}
		return mb(heap - q)
	}
	for _, n := range ns {
		j, ok1 := findCache(r.caches, "", n, subjJCache)
		c, ok2 := findCache(r.caches, "", n, subjCRCache)
		t := newTarget("jcache steady heap ≤ 5%% of crcache's (N=%d)", n)
		if ok1 && ok2 {
			a, b := float64(j.First.Steady.HeapInuse), float64(c.First.Steady.HeapInuse)
			t.set(a <= 0.05*b, fmt.Sprintf("%s / %s MiB = %.1f%% (after the restart: %s / %s MiB = %.1f%%)", mb(j.First.Steady.HeapInuse), mb(c.First.Steady.HeapInuse), 100*a/b,
				mb(j.Restart.Steady.HeapInuse), mb(c.Restart.Steady.HeapInuse), 100*float64(j.Restart.Steady.HeapInuse)/float64(c.Restart.Steady.HeapInuse)))
			if x, y := lessQueue(j.First.Steady.HeapInuse, j.Objects), lessQueue(c.First.Steady.HeapInuse, c.Objects); x != "" && y != "" {
				t.measured += fmt.Sprintf("; less the controller's priority queue's %.0f B an object (BenchmarkControllerQueueRetained): %s / %s MiB", queuePerObject, x, y)
			}
		}
		ts = append(ts, t)
	}
	lo, hi := ns[0], ns[len(ns)-1]
	t := newTarget("jcache steady heap flat in N: heap at N=%d within ±10%% of heap at N=%d", hi, lo)
	a, ok1 := findCache(r.caches, "", lo, subjJCache)
	b, ok2 := findCache(r.caches, "", hi, subjJCache)
	if ok1 && ok2 && lo != hi {
		x := float64(b.First.Steady.HeapInuse) / float64(a.First.Steady.HeapInuse)
		t.set(x >= 0.9 && x <= 1.1, fmt.Sprintf("%s / %s MiB = %.2f×", mb(b.First.Steady.HeapInuse), mb(a.First.Steady.HeapInuse), x))
		if x, y := lessQueue(b.First.Steady.HeapInuse, b.Objects), lessQueue(a.First.Steady.HeapInuse, a.Objects); x != "" && y != "" {
			t.measured += fmt.Sprintf(" (less the controller's priority queue's %.0f B an object: %s / %s MiB)", queuePerObject, x, y)
		}
	}
	ts = append(ts, t)
	ref := hi
	if slices.Contains(ns, 200_000) {
		ref = 200_000
	}
	t = newTarget("jcache RSS ≤ 15%% of crcache's (N=%d)", ref)
	j, ok1 := findCache(r.caches, "", ref, subjJCache)
	c, ok2 := findCache(r.caches, "", ref, subjCRCache)
	if ok1 && ok2 {
		a, b := float64(j.First.Steady.RSS), float64(c.First.Steady.RSS)
		t.set(a <= 0.15*b, fmt.Sprintf("%s / %s MiB = %.1f%% (anon %s MiB)", mb(j.First.Steady.RSS), mb(c.First.Steady.RSS), 100*a/b, mb(j.First.Steady.RSSAnon)))
	}
	ts = append(ts, t)
	for _, n := range ns {
		j, ok1 := findCache(r.caches, "", n, subjJCache)
		c, ok2 := findCache(r.caches, "", n, subjCRCache)
		// The start targets: a first start no slower than crcache's, a
		// restart with nothing changed a fraction of crcache's (which
		// lists again), the fraction smaller the larger N, as the
		// restart's cost should not grow like a list.
		restartLimit := 0.5
		if n >= 200_000 {
			restartLimit = 0.25
		}
		startTarget := func(limit float64, name string, pick func(cacheStart) float64, j, c cacheStart) {
			t := newTarget("%s ≤ %.2g× crcache's (N=%d)", name, limit, n)
			if ok1 && ok2 && pick(c) > 0 {
				t.set(pick(j) <= limit*pick(c), fmt.Sprintf("%.2f / %.2f s = %s", pick(j), pick(c), ratio(pick(j), pick(c))))
				if t.state == "MISSED" {
					t.measured += "; " + startSpent(j, c)
				}
			}
			ts = append(ts, t)
		}
		first := func(s cacheStart) float64 { return s.FirstReconcileSeconds }
		every := func(s cacheStart) float64 { return s.AllSeconds }
		startTarget(1, "first start (empty directory): exec to the first reconcile", first, j.First, c.First)
		startTarget(1, "first start (empty directory): exec to every object reconciled", every, j.First, c.First)
		startTarget(restartLimit, "restart, nothing changed: exec to the first reconcile", first, j.Restart, c.Restart)
		if n >= 200_000 {
			startTarget(0.7, "restart, nothing changed: exec to every object reconciled", every, j.Restart, c.Restart)
		}
		for _, rd := range []struct {
			name string
			pick func(cacheReads) float64
		}{
			{"Get p50", func(r cacheReads) float64 { return r.GetP50 }},
			{fmt.Sprintf("List through the index (%d objects) p50", cacheGroupSize), func(r cacheReads) float64 { return r.IndexP50 }},
			{fmt.Sprintf("List of a namespace of %d", cacheListN), func(r cacheReads) float64 { return r.NSListP50 }},
		} {
			t := newTarget("reads through mgr.GetClient(): %s ≤ 1.5× crcache's (N=%d)", rd.name, n)
			if ok1 && ok2 && rd.pick(c.Reads) > 0 {
				a, b := rd.pick(j.Reads), rd.pick(c.Reads)
				t.set(a <= 1.5*b, fmt.Sprintf("%.1f / %.1f µs = %s", 1e6*a, 1e6*b, ratio(a, b)))
				if t.state == "MISSED" {
					t.measured += "; " + readBound
				}
			}
			ts = append(ts, t)
		}
		t := newTarget("jcache-exact: a restart with nothing changed delivers nothing (N=%d)", n)
		if x, ok := findCache(r.caches, "", n, subjJCacheExact); ok {
			t.set(x.Restart.Reconciles == 0, fmt.Sprintf("%d reconciles; source ready %.2f s, idle %.2f s after exec (crcache's restart: first reconcile %s s)",
				x.Restart.Reconciles, x.Restart.ReadySeconds, x.Restart.AllSeconds, dash(ok2, "%.2f", c.Restart.FirstReconcileSeconds)))
		}
		ts = append(ts, t)
		t = newTarget("jcache-transform: disk with DefaultTransform = TransformStripManagedFields (N=%d)", n)
		if x, ok := findCache(r.caches, "", n, subjJCacheTransform); ok && ok1 && j.Restart.DiskBytes > 0 {
			t.measured = fmt.Sprintf("%s / %s MiB = %.0f%% of jcache's", mb(uint64(x.Restart.DiskBytes)), mb(uint64(j.Restart.DiskBytes)),
				100*float64(x.Restart.DiskBytes)/float64(j.Restart.DiskBytes))
			t.state = "reported"
		}
		ts = append(ts, t)
	}
	return append(ts, r.freshnessTargets(ns)...)
}

// startSpent splits a missed start target's time, jcache's and crcache's,
// at the informer's sync (the section's prose says what each part is).
func startSpent(j, c cacheStart) string {
	split := func(s cacheStart) string {
		return fmt.Sprintf("%.2f + %.2f + %.2f s", s.SyncedSeconds, max(s.FirstReconcileSeconds-s.SyncedSeconds, 0), max(s.AllSeconds-s.FirstReconcileSeconds, 0))
	}
	if j.SyncedSeconds == 0 || c.SyncedSeconds == 0 {
		return "no sync time to split it at"
	}
	return fmt.Sprintf("split at the sync (to synced + replay + reconciles): jcache %s, crcache %s", split(j), split(c))
}

// readBound is what bounds a missed read target: BenchmarkRead_* in
// jcache measures the parts in process.
const readBound = "what bounds it: a jcache read is B+tree lookups in the file (the key, then the object) and a decode of the stored bytes, crcache's a map lookup and a deep copy of an object in memory (go test -bench Read_ ./jcache/)"

// firstReconcile is a start's first-reconcile cell: seconds (in process),
// or, when nothing was reconciled (an Exact restart), none and when the
// source was ready.
func firstReconcile(s cacheStart) string {
	if s.FirstReconcileSeconds == 0 && s.ReadySeconds > 0 {
		return fmt.Sprintf("none (ready %.2f)", s.ReadySeconds)
	}
	return fmt.Sprintf("%.2f (%.2f)", s.FirstReconcileSeconds, s.InProcessSeconds)
}

// cacheSection returns the cache subjects' section of the results file,
// markers included; "" when none ran.
func (r *results) cacheSection() string {
	if len(r.caches) == 0 {
		return ""
	}
	var b strings.Builder
	b.WriteString(cacheBegin + "\n\n")
	b.WriteString("## controller-runtime's cache against jcache: an operator process\n\n")
	b.WriteString(r.writtenBy())
	fmt.Fprintf(&b, "N ConfigMaps of %d bytes of JSON as served, object i in namespace cache-<i mod %d> (N/%d a namespace), plus %d in %s, each labelled %s=true and %s=<i/%d>. %s",
		r.cacheObjectBytes, cacheNamespaces, cacheNamespaces, cacheListN, cacheListNS, cacheLabel, groupLabel, cacheGroupSize, r.creationsText(r.cacheCreations))
	b.WriteString("\n\n| N | subject | objects | load | heap MiB | RSS MiB | anon RSS MiB | informer synced s | first reconcile s (in process) | all reconciled s | start CPU s | restart: informer synced s | restart: first reconcile s (in process) | restart: all reconciled s | restart CPU s | restart heap MiB | restart RSS MiB | disk MiB |\n")
	b.WriteString("|--:|---|--:|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|\n")
	for _, x := range r.caches {
		if x.Err != "" {
			fmt.Fprintf(&b, "| %d | %s | error: %s ||||||||||||||||\n", x.N, x.Subject, cell(x.Err))
			continue
		}
		disk := mb(uint64(x.Restart.DiskBytes))
		fmt.Fprintf(&b, "| %d | %s | %d | %s | %s | %s | %s | %s | %s | %.2f | %.2f | %s | %s | %.2f | %.2f | %s | %s | %s |\n",
			x.N, x.Subject, x.Objects, x.Load, mb(x.First.Steady.HeapInuse), mb(x.First.Steady.RSS), mb(x.First.Steady.RSSAnon),
			secs(x.First.SyncedSeconds), firstReconcile(x.First), x.First.AllSeconds, x.First.CPU,
			secs(x.Restart.SyncedSeconds), firstReconcile(x.Restart), x.Restart.AllSeconds, x.Restart.CPU,
			mb(x.Restart.Steady.HeapInuse), mb(x.Restart.Steady.RSS), disk)
	}
	fmt.Fprintf(&b, "\nReads through mgr.GetClient() after the first start's reconciles: Get of a random object of the N (%d times), List with client.MatchingFields on the group index (%d objects in %d namespaces; %d times), List with client.InNamespace(%q) (%d objects; median of %d).\n",
		cacheGets, cacheGroupSize, cacheNamespaces, cacheIndexLists, cacheListNS, cacheListN, cacheNSLists)
	b.WriteString("\n| N | subject | Get p50 µs | Get p99 µs | List by index p50 ms | List by index p99 ms | List of a namespace ms | heap after reads MiB |\n|--:|---|--:|--:|--:|--:|--:|--:|\n")
	for _, x := range r.caches {
		if x.Err != "" {
			continue
		}
		fmt.Fprintf(&b, "| %d | %s | %.1f | %.1f | %.2f | %.2f | %.2f | %s |\n", x.N, x.Subject,
			1e6*x.Reads.GetP50, 1e6*x.Reads.GetP99, 1e3*x.Reads.IndexP50, 1e3*x.Reads.IndexP99, 1e3*x.Reads.NSListP50, mb(x.Reads.After.HeapInuse))
	}
	b.WriteString(r.freshnessTable())
	b.WriteString(`
- **The process**: this binary as a child, one per start: ctrl.NewManager with cache.Options{DefaultLabelSelector: ` + cacheLabel + `=true} (one cluster-wide informer of ConfigMaps, the apiserver filters), metrics and probes off, a field index on the group label (mgr.GetFieldIndexer().IndexField, before Start), one controller For(&corev1.ConfigMap{}) whose reconciler Gets the object through mgr.GetClient(). **crcache**: NewCache = cache.New (controller-runtime's default; reads deep-copy). **jcache**: NewCache = jcache.NewFunc(jcache.Options{Dir}), default options (fsync on, default retention, inspect socket on), ConfigMaps (Secrets would be sealed, with a key). **jcache-exact**: jcache's cache, the controller on jcache.Exact (WatchesRawSource of ExactController.Kind, the reconciler wrapped by ExactController.Reconciler): a restart with nothing changed delivers nothing, so its restart's **all reconciled** is when the source was idle (WaitForSync returned and its consumer committed every event in the file) and its first reconcile cell says none and when WaitForSync returned. **jcache-transform**: jcache with cache.Options.DefaultTransform = cache.TransformStripManagedFields() (objects stored transformed): its disk column against jcache's.
- **heap / RSS**: as the other subjects (HeapInuse and VmRSS after runtime.GC and debug.FreeOSMemory), once every object was reconciled once (the workqueue the start filled has drained; its maps keep the size they grew to, as Go maps do not shrink: BenchmarkControllerQueueRetained in bench/queue_bench_test.go measures that part, the same in both subjects, and the targets show the heap less it when the run has that benchmark's output, -gobench); **anon RSS**: RssAnon (jcache's RSS also counts bbolt's mapped file pages).
- **informer synced s**: from the parent's exec until the informer the controller watches (mgr.GetCache().GetInformer) reported HasSynced, polled every 5 ms: crcache, its store holds the list; jcache, its journal is current with the server (a list committed, or a resume the server proved), while the replay of the stored objects to the controller's handler, which the controller waits for (the handler registration's HasSynced), may still run. **first reconcile s**: from the parent's exec of the process to the reconciler's first call (in parentheses: from ctrl.NewManager in the process); **all reconciled**: from exec until every one of the objects was reconciled once; **start CPU**: the process's CPU time until then. **restart**: a new process on the same directory, nothing changed meanwhile (for crcache the same as a first start). **disk**: the directory's files after the restart's process exited. A missed start target splits its time at the informer's sync: exec to synced (jcache: the list written into its files, or on a restart the proof that the file is current; crcache: the list into memory), then the replay to the first reconcile (every stored object given to the controller's handler, which controller-runtime adds after the sync: jcache's from disk, crcache's from memory), then the reconciles until every object was reconciled. **load**: the 1-minute load average when the first start began (2 cores; other work may have run).
`)
	b.WriteString(targetsTable("target (the operator process: jcache against crcache)", r.cacheTargets()))
	b.WriteString("\n" + cacheEnd + "\n")
	return b.String()
}
