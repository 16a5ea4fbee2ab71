// Command benchharness measures watchjournal against client-go at scale, on
// a local control plane (internal/controlplane, watch cache on).
//
// For each N (BENCH_N, comma-separated, ascending; default 50000) it
// creates N ConfigMaps of about 1 KiB in one namespace with 32 parallel
// writers, then runs each subject in a child process of its own (this
// binary, re-executed with BENCH_CHILD set), so that memory is never mixed:
//
//   - watchjournal: a reconcile.Loop into a journal file in a temp dir;
//   - informer: a client-go SharedIndexInformer of typed ConfigMaps;
//   - informer-nogzip: the same with rest.Config.DisableCompression, as
//     kube-controller-manager runs and watchjournal does by default;
//   - metadata-informer: k8s.io/client-go/metadata/metadatainformer;
//   - transform-informer: the typed informer with a cache.TransformFunc that
//     keeps only name, namespace, UID and resourceVersion;
//   - bare-list: a paginated list (500 a page, resourceVersion unset) that
//     throws the items away: the apiserver's own list speed;
//   - bare-watch-list: a watch with sendInitialEvents=true (KEP-3157) read
//     until the initial-events-end bookmark: the apiserver's streaming list;
//   - journalctl: `journalctl watch` as a user runs it, the binary next to
//     this one (journalctl.go).
//
// Each subject then also relists once after a gap in which 1% of the
// objects changed, and the non-bare ones are restarted, with nothing and
// with 1% changed while they were down (restart.go).
//
// Each child reports, as JSON lines on stdout: the steady Go heap and RSS
// once synced; the time of the initial sync; how fast it absorbs a burst of
// updates the parent makes; and, during a relist the parent forces (compact
// etcd, then restart the apiserver behind a cut proxy so the watch cache
// forgets the old resourceVersions), the peak heap and RSS sampled every
// 50 ms, VmHWM and the relist's time. The parent prints one table and
// writes it, with the in-process benchmarks' output (-gobench) and the
// targets, to BENCHMARKS.md (-out).
//
// The cache subjects, crcache and jcache, are an operator process each on
// controller-runtime's cache and on jcache (cache.go, issue 23); a run of
// only those (-subjects crcache,jcache) creates none of the others'
// objects, skips the readers, and rewrites only the cache section of the
// results file (cache_results.go), keeping the rest.
//
// The workloads, -workload: besides the ConfigMaps above ("configmaps":
// the subjects, the readers, the cache subjects), Pods, a custom resource
// and Secrets (workload.go, issue 25), with watchjournal's disk cost during
// the churn; a run without the ConfigMaps rewrites only their section of
// the results file (workload_results.go), and the cache section when it
// ran.
//
// Environment: BENCH_N (object counts), BENCH_SUBJECTS (the subjects,
// comma-separated; default all), BENCH_WORKLOADS (the workloads,
// comma-separated; default all), BENCH_PPROF (a directory: children
// write CPU and heap profiles there, named <workload>-N<n>-<subject>-<phase>),
// BENCH_TRACE (1: an execution trace beside each CPU profile, for what a
// process waits on off-CPU: go tool trace -pprof=syscall|sync|net FILE),
// BENCH_COMMAND (the command recorded in the results file).
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"time"
)

func main() {
	if os.Getenv(envChild) != "" && os.Getenv(envPprof) != "" {
		// Heap profiles of a few MiB are meaningless at the default one
		// sample per 512 KiB; profiled runs are not the tables' runs.
		runtime.MemProfileRate = 8 << 10
	}
	if kind := os.Getenv(envChild); kind != "" {
		os.Exit(childMain(kind))
	}
	var o options
	flag.StringVar(&o.counts, "n", envOr("BENCH_N", "50000"), "object counts, comma-separated, ascending (default $BENCH_N or 50000)")
	flag.StringVar(&o.subjects, "subjects", envOr("BENCH_SUBJECTS", strings.Join(allSubjects, ",")), "subjects to run, comma-separated (default $BENCH_SUBJECTS or all)")
	flag.StringVar(&o.workloadNames, "workload", envOr("BENCH_WORKLOADS", strings.Join(allWorkloads, ",")), "workloads to run, comma-separated: "+strings.Join(allWorkloads, ", ")+" (default $BENCH_WORKLOADS or all)")
	flag.IntVar(&o.burst, "burst", 5000, "updates in the burst")
	flag.IntVar(&o.workers, "workers", 32, "parallel writers for creation and the burst")
	flag.IntVar(&o.relists, "relists", 3, "forced relists per subject; the table shows the median time and the largest peaks")
	flag.StringVar(&o.out, "out", "", "results file to write (BENCHMARKS.md); empty: none")
	flag.StringVar(&o.gobench, "gobench", "", "output of the in-process go test -bench run to include in the results file")
	flag.StringVar(&o.command, "command", envOr("BENCH_COMMAND", ""), "the command recorded as the way to reproduce the results")
	flag.BoolVar(&o.keep, "keep", false, "keep the control plane's directory")
	flag.BoolVar(&o.readers, "readers", true, "measure journal/cache's Reader against the informer's lister at every N (lister.go); only when a subject other than the cache subjects runs")
	flag.StringVar(&o.jsonOut, "json", "", "file to write every row, with all the children's reports, as JSON; empty: none")
	flag.Parse()

	for _, f := range strings.Split(o.counts, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n <= 0 {
			fatalf("bad object count %q", f)
		}
		if len(o.ns) > 0 && n < o.ns[len(o.ns)-1] {
			fatalf("object counts must be ascending: %s", o.counts)
		}
		o.ns = append(o.ns, n)
	}
	o.subjectList = names(o.subjects, "subject", allSubjects)
	o.workloads = names(o.workloadNames, "workload", allWorkloads)
	// The readers belong to the other subjects' run: a run of the cache
	// subjects alone (e.g. BENCH_SUBJECTS=crcache,jcache) skips them.
	o.readers = o.readers && slices.Contains(o.workloads, wlConfigMaps) && slices.ContainsFunc(o.subjectList, func(s string) bool { return !isCache(s) })
	if o.command == "" {
		o.command = "make bench BENCH_N=" + o.counts
	}
	began := time.Now()
	res, err := run(context.Background(), o)
	if err != nil {
		fatalf("%v", err)
	}
	res.took = time.Since(began)
	fmt.Print(res.text())
	if o.jsonOut != "" {
		b, err := json.MarshalIndent(append(slices.Clip(res.rows), res.wlRows...), "", "  ")
		if err == nil {
			err = os.WriteFile(o.jsonOut, b, 0o644)
		}
		if caches := append(slices.Clip(res.caches), res.wlCaches...); err == nil && len(caches) > 0 {
			// The cache subjects' rows beside: FILE-cache.json (a
			// workload's with its name in workload).
			b, err = json.MarshalIndent(caches, "", "  ")
			if err == nil {
				err = os.WriteFile(strings.TrimSuffix(o.jsonOut, ".json")+"-cache.json", b, 0o644)
			}
		}
		if err != nil {
			fatalf("%v", err)
		}
	}
	if o.out != "" {
		if err := res.write(o.out); err != nil {
			fatalf("%v", err)
		}
		logf("wrote %s (harness took %v)", o.out, res.took.Round(time.Second))
	}
}

type options struct {
	counts, subjects string
	ns               []int
	subjectList      []string
	workloadNames    string
	workloads        []string
	burst, workers   int
	relists          int
	out, gobench     string
	command          string
	jsonOut          string
	keep             bool
	readers          bool
}

// names splits a comma-separated list of names of what, each one of known.
func names(list, what string, known []string) []string {
	var ns []string
	for _, s := range strings.Split(list, ",") {
		s = strings.TrimSpace(s)
		if !slices.Contains(known, s) {
			fatalf("unknown %s %q (known: %s)", what, s, strings.Join(known, ", "))
		}
		ns = append(ns, s)
	}
	return ns
}

func envOr(k, def string) string {
	if v := os.Getenv(k); v != "" {
		return v
	}
	return def
}

func logf(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "%s benchharness: %s\n", time.Now().Format("15:04:05"), fmt.Sprintf(format, args...))
}

func fatalf(format string, args ...any) {
	logf(format, args...)
	os.Exit(1)
}
