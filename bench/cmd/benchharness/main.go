// Command benchharness measures watchjournal against client-go at scale, on
// a local control plane (internal/testing/controlplane, watch cache on): bench/doc.go
// says what it runs, and the notes it writes beside its tables what each
// column measures.
//
// For each N (-n, ascending) it creates the objects with -workers parallel
// writers, then runs each subject (subjects.go, journalctl.go; the readers,
// lister.go; the cache subjects, cache.go) in a child process of its own,
// this binary re-executed with BENCH_CHILD set (child.go), so that memory
// is never mixed. A child syncs, takes a burst of updates and relists when
// the parent forces it (parent.go), reporting JSON lines on stdout; then
// the subject restarts (restart.go). The workloads other than the
// ConfigMaps (-workload) are workload.go's. A run of only the cache
// subjects, or without the ConfigMaps, rewrites only its sections of the
// results file (cache_results.go, sharded_results.go, workload_results.go)
// and keeps the rest. jcache-sharded runs three replicas of the cache
// subjects' operator as one shard group (sharded.go).
//
// Environment: BENCH_N, BENCH_SUBJECTS and BENCH_WORKLOADS (the flags'
// defaults), BENCH_PPROF (a directory: children write CPU and heap profiles
// there, named <workload>-N<n>-<subject>-<phase>), BENCH_TRACE (1: an
// execution trace beside each CPU profile, for what a process waits on
// off-CPU: go tool trace -pprof=syscall|sync|net FILE), BENCH_COMMAND (the
// command recorded in the results file).
package main

import (
	"cmp"
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
	var counts, subjects, workloads string
	flag.StringVar(&counts, "n", cmp.Or(os.Getenv("BENCH_N"), "50000"), "object counts, comma-separated, ascending (default $BENCH_N or 50000)")
	flag.StringVar(&subjects, "subjects", cmp.Or(os.Getenv("BENCH_SUBJECTS"), strings.Join(allSubjects, ",")), "subjects to run, comma-separated (default $BENCH_SUBJECTS or all)")
	flag.StringVar(&workloads, "workload", cmp.Or(os.Getenv("BENCH_WORKLOADS"), strings.Join(allWorkloads, ",")), "workloads to run, comma-separated: "+strings.Join(allWorkloads, ", ")+" (default $BENCH_WORKLOADS or all)")
	flag.IntVar(&o.burst, "burst", 5000, "updates in the burst")
	flag.IntVar(&o.workers, "workers", 32, "parallel writers for creation and the burst")
	flag.IntVar(&o.relists, "relists", 3, "forced relists per subject; the table shows the median time and the largest peaks")
	flag.StringVar(&o.out, "out", "", "results file to write (BENCHMARKS.md); empty: none")
	flag.StringVar(&o.gobench, "gobench", "", "output of the in-process go test -bench run to include in the results file")
	flag.StringVar(&o.command, "command", os.Getenv("BENCH_COMMAND"), "the command recorded as the way to reproduce the results")
	flag.BoolVar(&o.keep, "keep", false, "keep the control plane's directory")
	flag.BoolVar(&o.readers, "readers", true, "measure journal/cache's Reader against the informer's lister at every N (lister.go); only when a subject other than the cache subjects runs")
	flag.StringVar(&o.jsonOut, "json", "", "file to write every row, with all the children's reports, as JSON; empty: none")
	flag.Parse()

	for _, f := range strings.Split(counts, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n <= 0 {
			fatalf("bad object count %q", f)
		}
		if len(o.ns) > 0 && n < o.ns[len(o.ns)-1] {
			fatalf("object counts must be ascending: %s", counts)
		}
		o.ns = append(o.ns, n)
	}
	o.subjects = names(subjects, "subject", allSubjects)
	o.workloads = names(workloads, "workload", allWorkloads)
	// The readers belong to the other subjects' run: a run of the cache
	// subjects alone (e.g. BENCH_SUBJECTS=crcache,jcache) skips them.
	o.readers = o.readers && slices.Contains(o.workloads, wlConfigMaps) && slices.ContainsFunc(o.subjects, func(s string) bool { return !isCache(s) })
	if o.command == "" {
		o.command = "make bench BENCH_N=" + counts
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
		if err == nil && len(res.sharded) > 0 {
			// The sharded subject's rows beside: FILE-sharded.json.
			if b, err = json.MarshalIndent(res.sharded, "", "  "); err == nil {
				err = os.WriteFile(strings.TrimSuffix(o.jsonOut, ".json")+"-sharded.json", b, 0o644)
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
	ns                  []int
	subjects, workloads []string
	burst, workers      int
	relists             int
	out, gobench        string
	command             string
	jsonOut             string
	keep                bool
	readers             bool
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

func logf(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "%s benchharness: %s\n", time.Now().Format("15:04:05"), fmt.Sprintf(format, args...))
}

func fatalf(format string, args ...any) {
	logf(format, args...)
	os.Exit(1)
}
