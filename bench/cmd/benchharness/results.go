package main

// The results: the table, the targets and the results file.

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"os"
	"regexp"
	"runtime"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"
	"time"

	"k8s.io/client-go/kubernetes"

	"github.com/watchjournal/watchjournal/internal/testing/controlplane"
)

// handWritten marks the start of the part of the results file that the
// harness keeps as it is when it rewrites the file.
const handWritten = "<!-- Everything below this line is written by hand; benchharness keeps it. -->"

type results struct {
	o           options
	rows        []row
	creations   []creation
	objectBytes int
	gobench     []byte
	took        time.Duration
	readers     []readerRow // lister.go

	// The workloads other than the ConfigMaps (workload.go): their
	// subjects' rows and what the parent measured of each.
	wlRows    []row
	wlCaches  []cacheRow
	workloads []workloadResult

	// The cache subjects (cache.go): rows, creations, one object's size.
	caches           []cacheRow
	cacheCreations   []creation
	cacheObjectBytes int
	// sharded are the sharded subject's rows (sharded.go).
	sharded []shardedRow

	date                  time.Time
	cpu, kernel           string
	nproc                 int
	memTotal              uint64
	goVersion, kube, etcd string
	clientGo, bbolt       string
	// revision is the commit of the module this binary was built from,
	// with "+modified" when the working tree had changes.
	revision string
}

// describe records the machine and the versions.
func (r *results) describe(ctx context.Context, cp *controlplane.ControlPlane, kube kubernetes.Interface) error {
	r.date = time.Now().UTC()
	r.nproc = runtime.NumCPU()
	r.goVersion = runtime.Version()
	if b, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		if m := regexp.MustCompile(`(?m)^model name\s*:\s*(.+)$`).FindSubmatch(b); m != nil {
			r.cpu = strings.TrimSpace(string(m[1]))
		}
	}
	if b, err := os.ReadFile("/proc/meminfo"); err == nil {
		if m := regexp.MustCompile(`(?m)^MemTotal:\s*(\d+) kB`).FindSubmatch(b); m != nil {
			kb, _ := strconv.ParseUint(string(m[1]), 10, 64)
			r.memTotal = kb << 10
		}
	}
	if b, err := os.ReadFile("/proc/sys/kernel/osrelease"); err == nil {
		r.kernel = strings.TrimSpace(string(b))
	}
	if bi, ok := debug.ReadBuildInfo(); ok {
		modified := false
		for _, st := range bi.Settings {
			switch st.Key {
			case "vcs.revision":
				r.revision = st.Value
			case "vcs.modified":
				modified = st.Value == "true"
			}
		}
		if modified {
			r.revision += "+modified"
		}
		if r.revision == "" {
			r.revision = "unknown (built with -buildvcs=false)"
		}
		for _, d := range bi.Deps {
			switch d.Path {
			case "k8s.io/client-go":
				r.clientGo = d.Version
			case "go.etcd.io/bbolt":
				r.bbolt = d.Version
			}
		}
	}
	v, err := kube.Discovery().ServerVersion()
	if err != nil {
		return err
	}
	r.kube = v.GitVersion
	var ev struct {
		Server string `json:"etcdserver"`
	}
	if err := etcdCall(ctx, cp, "/version", nil, &ev); err != nil {
		return err
	}
	r.etcd = ev.Server
	return nil
}

// dash formats args when ok, and is "–" otherwise.
func dash(ok bool, format string, args ...any) string {
	if !ok {
		return "–"
	}
	return fmt.Sprintf(format, args...)
}

func mb(b uint64) string    { return dash(b != 0, "%.1f", float64(b)/(1<<20)) }
func secs(s float64) string { return dash(s != 0, "%.2f", s) }

// relistSeen says what shows that the subject really relisted.
func relistSeen(r row) string {
	var parts []string
	if len(r.Relists) > 0 {
		parts = append(parts, fmt.Sprintf("%d relists", len(r.Relists)))
	}
	if r.Relisted.Gone >= 0 {
		parts = append(parts, fmt.Sprintf("410s %d", r.Relisted.Gone))
	}
	if r.Relisted.Lists > 0 {
		parts = append(parts, fmt.Sprintf("lists %d (%d pages)", r.Relisted.Lists, r.Relisted.Pages))
	}
	if r.Relisted.WatchLists > 0 {
		parts = append(parts, fmt.Sprintf("watch-lists %d", r.Relisted.WatchLists))
	}
	if r.Relisted.Note != "" {
		parts = append(parts, r.Relisted.Note)
	}
	if len(parts) == 0 {
		return "none"
	}
	return strings.Join(parts, ", ")
}

// text returns the tables and the targets as the harness prints them.
func (r *results) text() string {
	return rowsTable(r.rows) + "\n" + r.restartTable() + r.readerTable() + r.targetsText() + r.cacheSection() + r.shardedSection() + r.workloadSection()
}

// rowsTable returns rows as one Markdown table.
func rowsTable(rows []row) string {
	var b strings.Builder
	b.WriteString("| N | subject | heap MiB | RSS MiB | peak heap MiB | peak RSS MiB | sync s | relist s | events/s | lag ms | sync CPU s | relist CPU s | peak live MiB | anon RSS MiB | relist VmHWM MiB | base heap MiB | relist seen |\n")
	b.WriteString("|--:|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|---|\n")
	for _, x := range rows {
		if x.Err != "" {
			fmt.Fprintf(&b, "| %d | %s | error: %s ||||||||||||||||\n", x.N, x.Subject, cell(x.Err))
			continue
		}
		ev, lag := dash(x.BurstK > 0, "%.0f", x.EventsPerS), dash(x.BurstK > 0, "%.0f", 1000*x.LagSeconds)
		fmt.Fprintf(&b, "| %d | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |\n",
			x.N, x.Subject, mb(x.Synced.Steady.HeapInuse), mb(x.Synced.Steady.RSS),
			mb(x.Relisted.PeakHeap), mb(x.Relisted.PeakRSS), secs(x.Synced.SyncSeconds), secs(x.Relisted.RelistSeconds),
			ev, lag, secs(x.Synced.SyncCPU), secs(x.Relisted.RelistCPU), mb(x.Relisted.PeakLive), mb(x.Synced.Steady.RSSAnon), mb(x.Relisted.HWM), mb(x.Synced.Base.HeapInuse), relistSeen(x))
	}
	return b.String()
}

// cell makes s fit in a table's cell, where a | would end it.
func cell(s string) string { return strings.ReplaceAll(s, "|", "/") }

// first returns the first of xs that match accepts.
func first[T any](xs []T, match func(T) bool) (T, bool) {
	if i := slices.IndexFunc(xs, match); i >= 0 {
		return xs[i], true
	}
	var zero T
	return zero, false
}

// findRow returns the row of subject at n of workload w ("" for the
// ConfigMaps), unless it failed.
func findRow(rows []row, w string, n int, subject string) (row, bool) {
	return first(rows, func(x row) bool { return x.Workload == w && x.N == n && x.Subject == subject && x.Err == "" })
}

// find returns the ConfigMaps' row of subject at n, unless it failed.
func (r *results) find(n int, subject string) (row, bool) { return findRow(r.rows, "", n, subject) }

// target is one target and whether the run meets it.
type target struct {
	name, measured string
	state          string // "holds", "MISSED", "not measured"
}

// newTarget returns the target named by format and args, not measured.
func newTarget(format string, args ...any) target {
	return target{name: fmt.Sprintf(format, args...), state: "not measured"}
}

// set records what was measured and whether it meets the target.
func (t *target) set(ok bool, measured string) {
	t.measured, t.state = measured, "MISSED"
	if ok {
		t.state = "holds"
	}
}

// ratioTarget is the target name: a ≤ limit × b, both in unit; not
// measured unless both are positive.
func ratioTarget(name string, a, b float64, unit string, limit float64) target {
	t := target{name: name, state: "not measured"}
	if a > 0 && b > 0 {
		t.set(a/b <= limit, fmt.Sprintf("%.2f / %.2f %s = %.2f×", a, b, unit, a/b))
	}
	return t
}

// targetsTable returns ts as a Markdown table whose first column is head.
func targetsTable(head string, ts []target) string {
	var b strings.Builder
	b.WriteString("\n| " + head + " | measured | |\n|---|---|---|\n")
	for _, t := range ts {
		fmt.Fprintf(&b, "| %s | %s | %s |\n", t.name, t.measured, t.state)
	}
	return b.String()
}

// creationsText says how long each creation of objects took.
func (r *results) creationsText(cs []creation) string {
	var b strings.Builder
	for _, c := range cs {
		if c.To > c.From {
			fmt.Fprintf(&b, "Creating %d..%d took %.0f s (%.0f/s, %d writers). ", c.From, c.To-1, c.Seconds, float64(c.To-c.From)/c.Seconds, r.o.workers)
		}
	}
	return b.String()
}

// writtenBy is the opening of a section that a run may rewrite alone: when,
// at which commit, on what, and the command.
func (r *results) writtenBy() string {
	return fmt.Sprintf("Written by bench/cmd/benchharness on %s (the harness took %v), watchjournal at commit %s, on %s (%d cores). Reproduce with:\n\n    %s\n\n",
		r.date.Format("2006-01-02 15:04 MST"), r.took.Round(time.Second), r.revision, r.cpu, r.nproc, r.o.command)
}

// targets evaluates the targets on this run's numbers.
func (r *results) targets() []target {
	var ts []target
	ns := r.o.ns
	lo, hi := ns[0], ns[len(ns)-1]
	ref := hi
	if slices.Contains(ns, 50_000) {
		ref = 50_000
	}
	wj, ok1 := r.find(ref, subjWatchjournal)
	inf, ok2 := r.find(ref, subjInformer)
	t := newTarget("watchjournal steady heap ≤ 5%% of the full informer's (N=%d)", ref)
	if ok1 && ok2 {
		ratio := float64(wj.Synced.Steady.HeapInuse) / float64(inf.Synced.Steady.HeapInuse)
		t.set(ratio <= 0.05, fmt.Sprintf("%s / %s MiB = %.1f%%", mb(wj.Synced.Steady.HeapInuse), mb(inf.Synced.Steady.HeapInuse), 100*ratio))
	}
	ts = append(ts, t)

	t = newTarget("watchjournal heap flat in N: heap at N=%d ≤ 1.25× heap at N=%d", hi, lo)
	a, ok1 := r.find(lo, subjWatchjournal)
	b, ok2 := r.find(hi, subjWatchjournal)
	if ok1 && ok2 && lo != hi {
		ratio := float64(b.Synced.Steady.HeapInuse) / float64(a.Synced.Steady.HeapInuse)
		t.set(ratio <= 1.25, fmt.Sprintf("%s / %s MiB = %.2f×", mb(b.Synced.Steady.HeapInuse), mb(a.Synced.Steady.HeapInuse), ratio))
	}
	ts = append(ts, t)

	// The steady heap is measured after a forced GC: what is live. The peak
	// is compared the same way, as the largest heap a GC found live during
	// the relist (every cycle is sampled). HeapInuse between two GCs also
	// holds garbage not yet collected, up to GOGC=100's heap goal of twice
	// the live heap, in any Go program that allocates: it is shown beside.
	for _, n := range ns {
		t := newTarget("watchjournal peak heap during a relist ≤ 1.5× its steady heap, both as a GC finds them live (N=%d)", n)
		if x, ok := r.find(n, subjWatchjournal); ok && x.Relisted.PeakLive > 0 {
			ratio := float64(x.Relisted.PeakLive) / float64(x.Synced.Steady.HeapLive)
			t.measured = fmt.Sprintf("%s / %s MiB live = %.2f× over the relists' %d GC cycles (HeapInuse, garbage included: %s / %s MiB = %.2f×",
				mb(x.Relisted.PeakLive), mb(x.Synced.Steady.HeapLive), ratio, x.Relisted.GCCycles,
				mb(x.Relisted.PeakHeap), mb(x.Synced.Steady.HeapInuse), float64(x.Relisted.PeakHeap)/float64(x.Synced.Steady.HeapInuse))
			if l, ok := r.find(n, subjList); ok && l.Relisted.PeakHeap > 0 {
				t.measured += fmt.Sprintf("; the bare list, which keeps nothing: %.2f×", float64(l.Relisted.PeakHeap)/float64(l.Synced.Steady.HeapInuse))
			}
			if inf, ok := r.find(n, subjInformer); ok && inf.Relisted.PeakLive > 0 {
				t.measured += fmt.Sprintf("; the informer's live heap: %.2f×", float64(inf.Relisted.PeakLive)/float64(inf.Synced.Steady.HeapLive))
			}
			// The streaming floor: a client that decodes the same stream
			// and keeps nothing.
			if w, ok := r.find(n, subjWatchList); ok && w.Relisted.PeakLive > 0 {
				t.measured += fmt.Sprintf("; the bare watch-list's live heap, which keeps nothing: %s / %s MiB = %.2f×",
					mb(w.Relisted.PeakLive), mb(w.Synced.Steady.HeapLive), float64(w.Relisted.PeakLive)/float64(w.Synced.Steady.HeapLive))
			}
			if p, ok := r.find(n, subjWatchjournalPaged); ok && p.Relisted.PeakLive > 0 {
				t.measured += fmt.Sprintf("; watchjournal-paged's live heap: %.2f×", float64(p.Relisted.PeakLive)/float64(p.Synced.Steady.HeapLive))
			}
			t.set(ratio <= 1.5, t.measured+")")
		}
		ts = append(ts, t)
	}
	for _, n := range ns {
		x, _ := r.find(n, subjWatchjournal) // a missing row relisted in 0 s: not measured
		l, _ := r.find(n, subjList)
		ts = append(ts, ratioTarget(fmt.Sprintf("watchjournal relist time ≤ 1.3× the bare paginated list (N=%d)", n),
			x.Relisted.RelistSeconds, l.Relisted.RelistSeconds, "s", 1.3))
	}

	ts = append(ts, r.restartTargets()...) // restart_results.go

	gb := parseGobench(r.gobench)
	add := func(name, bench, unit string, ok func(float64) bool) {
		t := target{name: name, state: "not measured"}
		if v, found := gb[bench][unit]; found {
			t.set(ok(v), fmt.Sprintf("%.0f %s (%s)", v, unit, bench))
		}
		ts = append(ts, t)
	}
	add("journal append ≥ 100,000 events/s in process (1,000 events of ~1 KiB per Update, fsync)",
		"BenchmarkJournalAppend/batch=1000", "events/s", func(v float64) bool { return v >= 100_000 })
	add("journal replay ≥ 300,000 events/s in process (Journal.Read, 1,000 a call)",
		"BenchmarkJournalRead/batch=1000", "events/s", func(v float64) bool { return v >= 300_000 })
	add("index on disk ≤ 200 bytes per object (index-only file, keys in list order)",
		"BenchmarkIndexSize/store/key-order", "file-B/obj", func(v float64) bool { return v <= 200 })
	add("index on disk ≤ 200 bytes per object (index-only file, keys in random order)",
		"BenchmarkIndexSize/store/random-order", "file-B/obj", func(v float64) bool { return v <= 200 })
	ts = append(ts, r.readerTargets()...)
	return ts
}

func (r *results) targetsText() string { return targetsTable("target", r.targets()) }

var benchSuffix = regexp.MustCompile(`-\d+$`)

// parseGobench reads go test -bench output: benchmark name (without the
// -GOMAXPROCS suffix) → unit → value.
func parseGobench(out []byte) map[string]map[string]float64 {
	m := map[string]map[string]float64{}
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) < 4 || !strings.HasPrefix(f[0], "Benchmark") {
			continue
		}
		name := benchSuffix.ReplaceAllString(f[0], "")
		units := map[string]float64{}
		for i := 2; i+1 < len(f); i += 2 {
			v, err := strconv.ParseFloat(f[i], 64)
			if err != nil {
				break
			}
			units[f[i+1]] = v
		}
		m[name] = units
	}
	return m
}

// write writes the results file, keeping its hand-written part.
func (r *results) write(path string) error {
	var kept []byte
	old, err := os.ReadFile(path)
	if err == nil {
		if i := bytes.Index(old, []byte(handWritten)); i >= 0 {
			kept = old[i+len(handWritten):]
		}
	}
	if err == nil && len(r.rows) == 0 && len(r.readers) == 0 && (len(r.caches) > 0 || len(r.sharded) > 0 || len(r.workloads) > 0) {
		// Only the cache subjects or the workloads (or both) ran: their
		// sections are all that changes.
		if len(r.caches) > 0 {
			old = spliceSection(old, cacheBegin, cacheEnd, r.cacheSection())
		}
		if len(r.sharded) > 0 {
			old = spliceSection(old, shardedBegin, shardedEnd, r.shardedSection())
		}
		if len(r.workloads) > 0 {
			old = spliceSection(old, workloadsBegin, workloadsEnd, r.workloadSection())
		}
		return os.WriteFile(path, old, 0o644)
	}
	cacheText := r.cacheSection()
	if len(r.caches) == 0 { // not run: keep the last run's section
		cacheText = string(oldSection(old, cacheBegin, cacheEnd))
	}
	shardedText := r.shardedSection()
	if len(r.sharded) == 0 { // not run: keep the last run's section
		shardedText = string(oldSection(old, shardedBegin, shardedEnd))
	}
	wlText := r.workloadSection()
	if len(r.workloads) == 0 { // not run: keep the last run's section
		wlText = string(oldSection(old, workloadsBegin, workloadsEnd))
	}
	var b strings.Builder
	b.WriteString("# Benchmarks\n\n")
	fmt.Fprintf(&b, "Written by `make bench` (bench/cmd/benchharness) on %s; the harness took %v. Reproduce with:\n\n",
		r.date.Format("2006-01-02 15:04 MST"), r.took.Round(time.Second))
	fmt.Fprintf(&b, "    %s\n\n", r.o.command)
	b.WriteString("## Machine and versions\n\n")
	fmt.Fprintf(&b, "- CPU: %s, %d cores (nproc); memory %.1f GiB; Linux %s\n", r.cpu, r.nproc, float64(r.memTotal)/(1<<30), r.kernel)
	fmt.Fprintf(&b, "- Go %s; kube-apiserver %s (watch cache on); etcd %s; client-go %s; bbolt %s\n",
		r.goVersion, r.kube, r.etcd, r.clientGo, r.bbolt)
	fmt.Fprintf(&b, "- watchjournal at commit %s (the harness binary's VCS stamp; +modified: uncommitted changes in the tree, e.g. bench/ itself)\n", r.revision)
	fmt.Fprintf(&b, "- Other work may have run on the machine at the same time.\n\n")

	b.WriteString("## Against a local control plane, one subject per process\n\n")
	fmt.Fprintf(&b, "N ConfigMaps of %d bytes of JSON as served, in one namespace. %s\n\n", r.objectBytes, r.creationsText(r.creations))
	b.WriteString(rowsTable(r.rows))
	b.WriteString(r.readerTable())
	b.WriteString(`
- **heap**: runtime.MemStats.HeapInuse after runtime.GC() and debug.FreeOSMemory(), once synced; **RSS**: VmRSS at the same moment (for watchjournal it includes bbolt's memory-mapped file pages; **anon RSS** is RssAnon without them). **base heap**: the same measure in the child before the subject started (client-go's and the binary's own state; every child is the same binary).
- **peak heap / peak RSS**: the largest HeapInuse / VmRSS sampled every 50 ms from the start of the list request that relisted (see **relist s**; one sample before it) until the subject holds every object again; the JSON reports also keep the peaks from the moment the parent began forcing the relist, reconnection included (HeapInuse counts garbage not yet collected: with GOGC=100 the heap grows to about twice what the last GC found live, and never below 4 MiB in total); **peak live**: the largest /gc/heap/live:bytes, the heap a GC found live, read after every GC cycle over the same span (a finalizer that re-arms itself) as well as every 50 ms; **relist VmHWM**: VmHWM from forcing the relist until done (reset through /proc/self/clear_refs).
- **Subjects**: watchjournal (reconcile.Loop into a journal file, default options: protobuf watches stored as JSON, no gzip); informer (client-go SharedIndexInformer of typed ConfigMaps, client-go's defaults: protobuf, gzip requested); informer-nogzip (the same with rest.Config.DisableCompression, as kube-controller-manager runs and as watchjournal asks by default); metadata-informer (metadatainformer); transform-informer (the typed informer with a cache.TransformFunc keeping name, namespace, UID and resourceVersion); bare-list (pages of 500, resourceVersion unset, JSON; only each page's metadata is decoded, the items are read to io.Discard: the apiserver's own paginated list speed); bare-watch-list (a watch with sendInitialEvents=true, KEP-3157, read until the initial-events-end bookmark, each event decoded once with encoding/json and thrown away: the apiserver's streaming list, with a minimal client); bare-watch-list-meta (the same asking for PartialObjectMetadata, as the metadata informer does: the floor of a metadata-only streaming relist before it fetches any changed object in full); watchjournal-paged (watchjournal with ListModePaginated, what a server without streaming lists gets).
- **sync s**: from the subject's start until it holds all N objects (watchjournal: the initial list committed to the journal; informers: N add notifications delivered; bare list: one full list).
- **relist s**: from the start of the list request that succeeded after the relist was forced (attempts that failed while the proxy was cut do not count) (counted by a WrapTransport) until the subject holds every object again: watchjournal's list committed; an informer's Replace delivered all N objects to its handler again; for the bare list, a second full paginated list, made after the same apiserver restart. The median of the relists (3 by default, -relists).
- **sync CPU s / relist CPU s**: the child's CPU time (user + system, getrusage) over the sync / from arming the relist until done (median): the client's own cost, steadier than wall time on a shared machine.
- **events/s**: the parent patches ` + fmt.Sprint(r.o.burst) + ` objects with ` + fmt.Sprint(r.o.workers) + ` writers as fast as the apiserver takes them; events/s = updates / (time the subject has seen the last − first write). It cannot exceed the apiserver's write rate. **lag ms**: from the last write's answer to the subject seeing it.
- **Forcing the relist** (restart mode): each child talks to the apiserver through its own TCP proxy. The parent cuts the proxy, writes to another namespace so etcd's revision moves past the child's, compacts etcd, restarts the apiserver (its watch cache then starts at the compacted revision; without a restart the cache keeps serving watches from its own window of events and answers no 410), waits until it serves lists, and heals the proxy. watchjournal resumes its watch from its stored resourceVersion, gets 410 and relists (**relist seen** shows the 410s and list requests); client-go's reflector relists after any broken watch, by default with a watch-list (sendInitialEvents=true, WatchListClient on since v1.35) served from the watch cache.
`)
	b.WriteString(r.restartSection())
	b.WriteString("\n## Targets\n")
	b.WriteString(r.targetsText())
	b.WriteString(cacheText)
	if shardedText != "" {
		b.WriteString("\n" + shardedText)
	}
	if wlText != "" {
		b.WriteString("\n" + wlText)
	}
	b.WriteString("\n## In process (no apiserver)\n\n")
	b.WriteString("`go test -run '^$' -bench . -benchmem ./bench/` (bench/journal_bench_test.go). events/s, objects/s and B/obj are custom metrics.\n\n")
	if len(r.gobench) > 0 {
		b.WriteString("```text\n")
		b.Write(bytes.TrimSpace(r.gobench))
		b.WriteString("\n```\n")
	} else {
		b.WriteString("Not run (no -gobench file).\n")
	}
	b.WriteString("\n" + handWritten)
	if len(kept) > 0 {
		b.Write(kept)
	} else {
		b.WriteString("\n")
	}
	return os.WriteFile(path, []byte(b.String()), 0o644)
}
