package main

import (
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// The golden render tests: the renderers fed fixed results, their Markdown
// compared byte for byte with testdata/golden-*.md. After a change meant to
// alter the output, rewrite them with
//
//	go test ./bench/cmd/benchharness -run TestGolden -update
var update = flag.Bool("update", false, "rewrite testdata/golden-*.md")

// goldenGobench is made-up go test -bench output with every benchmark the
// targets read.
const goldenGobench = `goos: linux
goarch: amd64
BenchmarkJournalAppend/batch=1000-2                   	      20	  9000000 ns/op	    111111 events/s
BenchmarkJournalAppend/batch=1000/nosync-2            	      50	  2500000 ns/op	    400000 events/s
BenchmarkJournalAppend/batch=1000/nosync/objects-2    	      40	  3000000 ns/op	    333333 events/s
BenchmarkJournalRead/batch=1000-2                     	     300	  4000000 ns/op	    250000 events/s
BenchmarkIndexSize/store/key-order-2                  	       1	100000000 ns/op	       150.0 file-B/obj
BenchmarkIndexSize/store/random-order-2               	       1	100000000 ns/op	       240.0 file-B/obj
BenchmarkControllerQueueRetained/priorityqueue/N=200000-2 	       1	500000000 ns/op	       312.0 retained-B/obj
PASS
`

// described fills in what describe would find, fixed.
func described(r *results) *results {
	r.date = time.Date(2026, 12, 3, 4, 5, 0, 0, time.UTC)
	r.took = 42*time.Minute + 7*time.Second
	r.cpu, r.nproc, r.memTotal, r.kernel = "Test CPU @ 2.00GHz", 2, 8<<30, "6.1.0-test"
	r.goVersion, r.kube, r.etcd, r.clientGo, r.bbolt = "go1.26.8", "v1.35.0", "3.6.5", "v0.37.2", "v1.5.0"
	r.revision = "0123456789abcdef0123456789abcdef01234567"
	r.o.burst, r.o.workers, r.o.relists = 5000, 32, 1
	if r.o.command == "" {
		r.o.command = "make bench BENCH_N=50000"
	}
	return r
}

// readersFixture is a made-up readers' run at each N, the informer's
// failing at the largest.
func readersFixture(ns []int) []readerRow {
	var rs []readerRow
	for i, n := range ns {
		j := readerRow{N: n, Kind: readerJournal}
		j.Synced.SyncSeconds = float64(n) / 20_000
		j.Synced.Steady.HeapInuse = 5<<20 + uint64(i)<<19
		j.Reads = readerStats{Objects: n + listN + 3, GetP50: 12e-6, GetP99: 40e-6, ListP50: 9e-3, Listed: listN, After: memory{HeapInuse: 6 << 20}}
		inf := readerRow{N: n, Kind: readerInformer}
		inf.Synced.SyncSeconds = float64(n) / 25_000
		inf.Synced.Steady.HeapInuse = uint64(n) * 2000
		inf.Reads = readerStats{Objects: n + listN + 3, GetP50: 2e-6, GetP99: 8e-6, ListP50: 4e-3, Listed: listN, After: memory{HeapInuse: uint64(n) * 2100}}
		if i == len(ns)-1 && len(ns) > 1 {
			inf = readerRow{N: n, Kind: readerInformer, Err: "reads: child exited | killed"}
		}
		rs = append(rs, j, inf)
	}
	return rs
}

// configMapsFixture is the real run in testdata/results.json (rows) and
// testdata/results-cache.json (the cache subjects'), written by
// benchharness -json at N=50000, with made-up readers and creations.
func configMapsFixture(t *testing.T) *results {
	r := &results{o: options{ns: []int{50_000}}}
	for file, v := range map[string]any{"results.json": &r.rows, "results-cache.json": &r.caches} {
		b, err := os.ReadFile(filepath.Join("testdata", file))
		if err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal(b, v); err != nil {
			t.Fatalf("%s: %v", file, err)
		}
	}
	r.objectBytes, r.cacheObjectBytes = 1017, 1093
	r.creations = []creation{{From: 0, To: 50_000, Seconds: 61.5}}
	r.cacheCreations = []creation{{From: 0, To: 50_000, Seconds: 70.25}}
	r.readers = readersFixture(r.o.ns)
	r.gobench = []byte(goldenGobench)
	return described(r)
}

// cachesFixture is a made-up run of both cache subjects at two N.
func cachesFixture() []cacheRow {
	var rs []cacheRow
	for i, n := range []int{20_000, 200_000} {
		f := float64(n) / 20_000
		for _, s := range []string{subjCRCache, subjJCache, subjJCacheExact, subjJCacheTransform} {
			x := cacheRow{N: n, Subject: s, Objects: n + cacheListN, Load: "3.25"}
			heap := uint64(n) * 1500
			if s != subjCRCache {
				heap = 6<<20 + uint64(i)<<20
				x.Restart.DiskBytes = int64(n) * 1400
			}
			x.First = cacheStart{FirstReconcileSeconds: 2 * f, InProcessSeconds: 1.5 * f, SyncedSeconds: 1.8 * f, AllSeconds: 3 * f, CPU: 4 * f, Reconciles: int64(n + cacheListN),
				Steady: memory{HeapInuse: heap, RSS: 3 * heap, RSSAnon: 2 * heap}}
			x.Restart.FirstReconcileSeconds, x.Restart.InProcessSeconds, x.Restart.AllSeconds, x.Restart.CPU = 0.5*f, 0.25*f, f, f
			x.Restart.Steady = memory{HeapInuse: heap + 1<<20, RSS: 3*heap + 1<<20}
			x.Reads = cacheReads{GetP50: 3e-6 * f, GetP99: 9e-6 * f, IndexP50: 1e-4, IndexP99: 4e-4, IndexListed: cacheGroupSize, NSListP50: 2e-3, NSListed: cacheListN,
				After: memory{HeapInuse: heap + 2<<20}}
			if s != subjCRCache {
				x.Reads.GetP50 *= 4
			}
			switch s {
			case subjJCacheExact: // its restart delivers nothing
				x.Restart.FirstReconcileSeconds, x.Restart.InProcessSeconds, x.Restart.Reconciles = 0, 0, 0
				x.Restart.ReadySeconds, x.Restart.AllSeconds = 0.25*f, 0.3*f
			case subjJCacheTransform:
				x.Restart.DiskBytes = int64(n) * 900
			}
			rs = append(rs, x)
		}
	}
	return rs
}

// restartGoldenFixture is restartResultsFixture with the rows a run may
// also have: journalctl, failed subjects, a failed relist with 1% changed
// and a failed restart, readers and a cache subject that failed.
func restartGoldenFixture() *results {
	r := restartResultsFixture()
	for _, n := range r.o.ns {
		cli := row{N: n, Subject: subjJournalctl}
		cli.Synced.Event, cli.Relisted.Gone = "synced", -1
		cli.Synced.SyncSeconds, cli.Synced.SyncCPU = float64(n)/15_000, float64(n)/30_000
		cli.Synced.Steady = memory{HeapInuse: 9 << 20, RSS: 60 << 20, RSSAnon: 20 << 20, HWM: 70 << 20}
		cli.RestartSame = &restartResult{Seconds: 0.3, restartReport: restartReport{CPU: 0.1, HWM: 65 << 20, PeakRSS: 65 << 20, Objects: n}}
		wl := row{N: n, Subject: subjWatchList, BurstK: 0}
		wl.Synced.SyncSeconds, wl.Synced.SyncCPU = float64(n)/40_000, float64(n)/80_000
		wl.Synced.Steady = memory{HeapInuse: 4 << 20, HeapLive: 3 << 20, RSS: 25 << 20}
		wl.Relists = []report{{RelistSeconds: 1.5, Lists: 0, WatchLists: 1, Gone: -1, PeakLive: 5 << 20, Note: "objects in key order: true"}}
		wl.Relisted = aggregate(wl.Relists)
		wl.ChangedRelistErr = "forcing the relist: etcd | down"
		bad := row{N: n, Subject: subjTransform, Err: "child: informer: 3 of 5 objects added | context deadline exceeded"}
		rows := []row{cli, wl, bad}
		if n == 200_000 {
			inf := row{N: n, Subject: subjInformerNoGzip, BurstK: 5000, EventsPerS: 1234.5, LagSeconds: 0.0425}
			inf.Synced.SyncSeconds = 12.25
			inf.RestartErr = "restart with 1% changed: the restarted child sent no restart report"
			inf.RestartSame = &restartResult{Seconds: 11, restartReport: restartReport{SubjectSeconds: 10.5, Bytes: 1 << 30, Requests: 12, Lists: 1, WatchLists: 0, Watches: 1, CPU: 20, PeakHeap: 300 << 20, PeakRSS: 400 << 20, Gone: -1}}
			rows = append(rows, inf)
		}
		r.rows = append(r.rows, rows...)
		for i := range r.rows {
			if x := &r.rows[i]; x.N == n && x.Subject == subjWatchjournal {
				x.BurstK, x.EventsPerS, x.WritesPerS, x.LagSeconds = 5000, 9876.5, 10000, 0.012
				x.Relists[0].Lists, x.Relists[0].Pages, x.Relists[0].Gone = 1, int64(n/500), 1
				x.Relists[0].PeakHeap, x.Relists[0].PeakLive, x.Relists[0].PeakRSS, x.Relists[0].HWM = 6<<20, 4<<20, 40<<20, 41<<20
				x.Relisted = aggregate(x.Relists)
				x.Synced.Steady.HeapLive = 2 << 20
				x.RestartSame.SubjectSeconds, x.RestartSame.Requests, x.RestartSame.Lists, x.RestartSame.Watches = 0.01, 5, 0, 1
			}
		}
	}
	r.creations = []creation{{From: 0, To: 20_000, Seconds: 30}, {From: 20_000, To: 200_000, Seconds: 250}, {From: 200_000, To: 1_000_000, Seconds: 1200}}
	r.objectBytes = 1017
	r.readers = readersFixture(r.o.ns)
	r.caches = []cacheRow{{N: 20_000, Subject: subjJCache, Err: "first start: waiting for the reconciles: no | reply"}}
	r.o.command = "make bench BENCH_N=20000,200000,1000000"
	return described(r)
}

// TestGolden renders fixed results as the harness prints them and as it
// writes the results file, and compares both with the golden files.
func TestGolden(t *testing.T) {
	cases := []struct {
		name    string
		results func(*testing.T) *results
	}{
		{"configmaps", configMapsFixture},
		{"restart", func(*testing.T) *results { return restartGoldenFixture() }},
		{"workloads", func(*testing.T) *results { return described(workloadResultsFixture()) }},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := c.results(t)
			golden(t, "golden-"+c.name+"-stdout.md", r.text()) // as main prints it
			path := filepath.Join(t.TempDir(), "BENCHMARKS.md")
			if err := r.write(path); err != nil {
				t.Fatal(err)
			}
			golden(t, "golden-"+c.name+".md", readFile(t, path))
		})
	}
}

// A run of only the cache subjects, then one of only the workloads, over
// a results file with both sections and a hand-written part: each replaces
// its section and keeps the rest.
func TestGoldenSplice(t *testing.T) {
	path := filepath.Join(t.TempDir(), "BENCHMARKS.md")
	r := restartGoldenFixture()
	w := described(workloadResultsFixture())
	r.wlRows, r.wlCaches, r.workloads = w.wlRows, w.wlCaches, w.workloads
	if err := r.write(path); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(readFile(t, path)+"\nNotes written by hand.\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	cm := described(&results{o: options{ns: []int{20_000, 200_000}}, caches: cachesFixture(), gobench: []byte(goldenGobench)})
	cm.cacheObjectBytes, cm.cacheCreations = 1093, []creation{{From: 0, To: 20_000, Seconds: 25}, {From: 20_000, To: 200_000, Seconds: 240}}
	cm.date = cm.date.Add(time.Hour)
	if err := cm.write(path); err != nil {
		t.Fatal(err)
	}
	w.date = w.date.Add(2 * time.Hour)
	w.wlRows[0].Synced.SyncSeconds = 0.75
	if err := w.write(path); err != nil {
		t.Fatal(err)
	}
	got := readFile(t, path)
	golden(t, "golden-splice.md", got)
	// A full run keeps the hand-written part and, when they did not run,
	// the cache and workloads sections: here, the same file again.
	full := restartGoldenFixture()
	full.caches = nil
	if err := full.write(path); err != nil {
		t.Fatal(err)
	}
	if again := readFile(t, path); again != got {
		t.Errorf("a full run without the cache subjects and the workloads changed their sections or the hand-written part:\n%s", again)
	}
}

func readFile(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// golden compares got with testdata/name, or rewrites it with -update.
func golden(t *testing.T, name, got string) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if *update {
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want := readFile(t, path)
	if got == want {
		return
	}
	gl, wl := strings.Split(got, "\n"), strings.Split(want, "\n")
	for i := range max(len(gl), len(wl)) {
		var g, w string
		if i < len(gl) {
			g = gl[i]
		}
		if i < len(wl) {
			w = wl[i]
		}
		if g != w {
			t.Fatalf("%s differs at line %d:\n got %q\nwant %q", path, i+1, g, w)
		}
	}
}
