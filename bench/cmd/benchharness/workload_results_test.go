package main

import (
	"strings"
	"testing"
)

// workloadResultsFixture is a made-up run of the pods workload at one N:
// watchjournal with its disk cost, the informer, the bare watch-list and
// the two cache subjects.
func workloadResultsFixture() *results {
	const n = 1000
	wj := row{N: n, Subject: subjWatchjournal, Workload: wlPods}
	wj.Synced.SyncSeconds, wj.Synced.SyncCPU = 0.7, 0.9
	wj.Synced.Steady = memory{HeapInuse: 4 << 20, HeapLive: 2 << 20, RSS: 40 << 20}
	wj.Relisted.PeakLive = 4 << 20 // 2.0× its steady live heap
	wj.RestartSame = &restartResult{Seconds: 0.05, restartReport: restartReport{Bytes: 4096, CPU: 0.02, PeakHeap: 4 << 20}}
	// 1,000 events in 2 s, 250 commits, 8 MiB written; the file 9 MiB
	// against 6 MiB served: 1.5×.
	wj.Disk = &diskCost{Events: 1000, Commits: 250, WriteBytes: 8 << 20, FileSize: 9 << 20, Allocated: 3 << 20, JournalBytes: 3 << 20, Objects: n, BurstSeconds: 2}
	inf := row{N: n, Subject: subjInformer, Workload: wlPods}
	inf.Synced.SyncSeconds, inf.Synced.SyncCPU = 1.0, 1.0
	inf.Synced.Steady = memory{HeapInuse: 100 << 20, HeapLive: 80 << 20}
	inf.RestartSame = &restartResult{Seconds: 1.1, restartReport: restartReport{Bytes: 6 << 20, Gone: -1}}
	wl := row{N: n, Subject: subjWatchList, Workload: wlPods}
	wl.Synced.Steady = memory{HeapInuse: 3 << 20, HeapLive: 2 << 20}
	wl.Relisted.PeakLive = 4 << 20 // 2.0× as well
	j := cacheRow{N: n, Subject: subjJCache, Workload: wlPods, Objects: n}
	j.Restart.DiskBytes = 12 << 20 // 2.0× the served bytes
	j.Reads = cacheReads{GetP50: 30e-6, IndexP50: 4e-3}
	c := cacheRow{N: n, Subject: subjCRCache, Workload: wlPods, Objects: n}
	c.Reads = cacheReads{GetP50: 10e-6, IndexP50: 1e-3}
	return &results{
		o:         options{ns: []int{n}, command: "make bench"},
		wlRows:    []row{wj, inf, wl},
		wlCaches:  []cacheRow{j, c},
		workloads: []workloadResult{{Name: wlPods, Creations: []creation{{From: 0, To: n, Seconds: 2}}, Served: []served{{N: n, Objects: n, Bytes: 6 << 20, Min: 5000, Max: 8000}}}},
	}
}

// The disk cost table: file ÷ served, bytes written an event, commits a
// second and events a commit, from the child's counters.
func TestWorkloadDiskTable(t *testing.T) {
	r := workloadResultsFixture()
	got := r.diskTable(r.workloads[0])
	want := "| 1000 | 6.0 | 6291 | 9.0 | 1.50× | 3.0 | 0.50× | 3.0 | 1000 | 8389 | 250 | 125 | 4.0 |"
	if !strings.Contains(got, want) {
		t.Errorf("disk table:\n%s\nwant a row %s", got, want)
	}
	if strings.Count(got, "\n") != 3 { // header, rule, one row: only watchjournal has a disk cost
		t.Errorf("disk table has %d lines; want 3:\n%s", strings.Count(got, "\n"), got)
	}
}

// The workload targets on the workload rows, with their verdicts.
func TestWorkloadTargets(t *testing.T) {
	got := verdicts(workloadResultsFixture().workloadTargets())
	want := map[string]string{
		"pods: steady file size ≤ 1.5× the objects' served bytes (N=1000)":                                              "holds 9.0 / 6.0 MiB = 1.50×",
		"pods: initial sync ≤ 0.8× the informer's time and ≤ 1.0× its CPU (N=1000)":                                     "holds 0.70 / 1.00 s = 0.70×; CPU 0.90 / 1.00 s = 0.90×",
		"pods: steady heap ≤ 5% of the informer's (N=1000)":                                                             "holds 4.0 / 100.0 MiB = 4.0%",
		"pods: relist peak live heap within 1.1× of the bare watch-list's own, each over its steady live heap (N=1000)": "holds watchjournal 4.0 / 2.0 MiB = 2.00×; bare watch-list 4.0 / 2.0 MiB = 2.00×; 1.00×",
		"pods: jcache's files ≤ 1.5× the objects' served bytes (N=1000)":                                                "MISSED 12.0 / 6.0 MiB = 2.00×",
		"pods: jcache Get p50 ≤ 2× crcache's, List through the index of 100 ≤ 3× (N=1000)":                              "MISSED Get 30.0 / 10.0 µs = 3.00×; List by index 4.00 / 1.00 ms = 4.00×",
	}
	if len(got) != len(want) {
		t.Errorf("%d targets; want %d: %v", len(got), len(want), got)
	}
	for name, w := range want {
		if g, ok := got[name]; !ok || !strings.HasPrefix(g, w) {
			t.Errorf("target %q = %q; want it to start with %q", name, g, w)
		}
	}
}

// The section: between its markers, one subsection a workload with the
// subjects', restarts', disk and cache tables.
func TestWorkloadSection(t *testing.T) {
	r := workloadResultsFixture()
	got := r.workloadSection()
	if !strings.HasPrefix(got, workloadsBegin+"\n") || !strings.HasSuffix(got, workloadsEnd+"\n") {
		t.Errorf("the section is not between its markers:\n%s", got)
	}
	for _, want := range []string{
		"### pods: " + workloadTitles[wlPods],
		"N=1000: 1000 objects, 6291 bytes an object of JSON as served (5000 to 8000; after the bursts).",
		"| 1000 | watchjournal | 4.0 | 40.0 |",
		"| 1000 | informer | 1.10 | 0.00 | 6144 | – | – |",
		"| 1000 | watchjournal | 0.05 | 0.02 | 4 | 4.0 | 0 |",
		"| 1000 | jcache |",
		"| 12.0 | 2.00× |",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("the section lacks %q:\n%s", want, got)
		}
	}
	if (&results{}).workloadSection() != "" {
		t.Errorf("a run without workloads has a workloads section")
	}
}

// A run without the ConfigMaps replaces the workloads section and keeps
// the cache section and the rest; a file without one gets it before the
// hand-written part.
func TestSpliceWorkloadSection(t *testing.T) {
	cache := cacheBegin + "\ncache\n" + cacheEnd + "\n"
	head, tail := "# Benchmarks\n\ntables\n\n"+cache+"\n", handWritten+"\nnotes\n"
	checkSplice(t, head, tail, workloadsBegin, workloadsEnd)
}
