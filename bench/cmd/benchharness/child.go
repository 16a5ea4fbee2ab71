package main

// The child: one subject in a process of its own. It reads commands from
// the parent on stdin and answers with reports on stdout, one JSON object a
// line. Nothing else may write to stdout (client-go's klog writes to
// stderr).

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"runtime/trace"
	"strconv"
	"strings"
	"time"

	"k8s.io/client-go/rest"
)

// Environment of a child.
const (
	envChild = "BENCH_CHILD" // the subject; its presence makes the process a child
	envHost  = "BENCH_HOST"  // apiserver (or proxy) URL
	envToken = "BENCH_TOKEN" // bearer token
	envNS    = "BENCH_NS"    // namespace of the ConfigMaps
	envN     = "BENCH_OBJECTS"
	envDir   = "BENCH_DIR"   // scratch directory (watchjournal's file)
	envTag   = "BENCH_TAG"   // prefix of profile file names
	envTrace = "BENCH_TRACE" // "1": a runtime/trace beside each CPU profile (BENCH_PPROF)
	envPprof = "BENCH_PPROF" // directory for CPU and heap profiles; unset: none
	// envWorkload is the workload (workload.go); unset: the ConfigMaps.
	envWorkload = "BENCH_WORKLOAD"
)

// command is a line from the parent.
type command struct {
	// Cmd is "burst" (count updates until K more are seen), "relist" (arm,
	// then wait for the relist the parent forces; the bare list waits for
	// "go", then lists), "go" or "exit".
	Cmd string `json:"cmd"`
	K   int64  `json:"k,omitempty"`
}

// report is a line to the parent.
type report struct {
	// Event is "synced", "burst-armed", "burst-done", "relist-armed",
	// "relisted", "bye" or "error".
	Event string `json:"event"`
	Err   string `json:"err,omitempty"`

	// synced
	Base        memory  `json:"base"`   // before the subject started, steady
	Steady      memory  `json:"steady"` // once synced, steady
	SyncSeconds float64 `json:"syncSeconds,omitempty"`
	SyncCPU     float64 `json:"syncCPUSeconds,omitempty"` // CPU time (user + system) the sync took

	// burst-done: when the last of the K updates was seen; the disk cost
	// over the burst (watchjournal).
	DoneUnixNano int64     `json:"doneUnixNano,omitempty"`
	Disk         *diskCost `json:"disk,omitempty"`

	// relisted
	RelistSeconds   float64 `json:"relistSeconds,omitempty"`    // the successful list request to done
	SinceArmSeconds float64 `json:"sinceArmSeconds,omitempty"`  // armed to done
	RelistCPU       float64 `json:"relistCPUSeconds,omitempty"` // CPU time from armed to done
	PeakHeap        uint64  `json:"peakHeap,omitempty"`
	PeakLive        uint64  `json:"peakLive,omitempty"` // largest heap a GC found live
	// ArmPeak* are the peaks from arming, so including the reconnection
	// while the parent forces the relist; Peak* are those from the first
	// list request (one sample before it) until done.
	ArmPeakHeap uint64 `json:"armPeakHeap,omitempty"`
	ArmPeakLive uint64 `json:"armPeakLive,omitempty"`
	ArmPeakRSS  uint64 `json:"armPeakRSS,omitempty"`
	PeakRSS     uint64 `json:"peakRSS,omitempty"`
	HWM         uint64 `json:"hwm,omitempty"`      // VmHWM over the relist (since start when reset failed)
	HWMReset    bool   `json:"hwmReset,omitempty"` // VmHWM was reset at arm
	Samples     int    `json:"samples,omitempty"`
	GCCycles    uint64 `json:"gcCycles,omitempty"` // GC cycles from arming until done, each one sampled
	After       memory `json:"after"`              // steady, after the relist
	Gone        int64  `json:"gone"`               // watchjournal: 410s seen; -1 otherwise
	Lists       int64  `json:"lists"`              // full lists started since arm
	WatchLists  int64  `json:"watchLists"`
	Pages       int64  `json:"pages"`
	Note        string `json:"note,omitempty"`

	// restarted (restart.go)
	Restart *restartReport `json:"restart,omitempty"`

	// reads (a reader child, lister.go)
	Reader *readerStats `json:"reader,omitempty"`

	// cache-synced, cache-reads (a cache subject's child, cache.go)
	Cache *cacheReport `json:"cache,omitempty"`

	// shard-synced, shard-takeover (a sharded replica, sharded.go)
	Shard *shardReport `json:"shard,omitempty"`
}

func childMain(kind string) int {
	out := json.NewEncoder(os.Stdout)
	send := func(r report) {
		if err := out.Encode(r); err != nil {
			fmt.Fprintf(os.Stderr, "benchharness child: stdout: %v\n", err)
			os.Exit(2)
		}
	}
	run := runChild
	switch {
	case os.Getenv(envRestart) != "":
		run = restartChild
	case isReader(kind):
		run = readerChildMain
	case kind == subjJCacheSharded:
		run = shardedChildMain
	case isCache(kind):
		run = cacheChildMain
	}
	n, cfg, err := childConfig()
	if err == nil {
		err = run(kind, n, cfg, send)
	}
	if err != nil {
		send(report{Event: "error", Err: err.Error()})
		return 1
	}
	return 0
}

// awaitExit blocks until the parent sends exit (true) or closes stdin.
func awaitExit() bool {
	in := bufio.NewScanner(os.Stdin)
	for in.Scan() {
		if strings.TrimSpace(in.Text()) == `{"cmd":"exit"}` {
			return true
		}
	}
	return false
}

// childConfig reads a child's object count (envN) and the apiserver it
// talks to (envHost, envToken) from its environment.
func childConfig() (int, *rest.Config, error) {
	n, err := strconv.Atoi(os.Getenv(envN))
	if err != nil {
		return 0, nil, fmt.Errorf("%s: %v", envN, err)
	}
	if w := childWorkload(); w != nil {
		collection = "/" + w.gvr.Resource
	}
	return n, &rest.Config{
		Host: os.Getenv(envHost), BearerToken: os.Getenv(envToken),
		TLSClientConfig: rest.TLSClientConfig{Insecure: true}, QPS: 1000, Burst: 2000,
	}, nil
}

func runChild(kind string, n int, cfg *rest.Config, send func(report)) error {
	prof := profiler{dir: os.Getenv(envPprof), tag: os.Getenv(envTag)}
	ctx := context.Background()

	base := steady()
	sub, err := newSubject(kind, cfg, os.Getenv(envNS), os.Getenv(envDir), n)
	if err != nil {
		return err
	}
	defer sub.close()

	stopCPU := prof.cpu("cpu-sync")
	began, cpu0 := time.Now(), cpuTime()
	sctx, cancel := context.WithTimeout(ctx, syncTimeout(n))
	err = sub.sync(sctx)
	cancel()
	took, cpu := time.Since(began), cpuTime()-cpu0
	stopCPU()
	if err != nil {
		return err
	}
	st := steady()
	prof.heap("heap-steady")
	send(report{Event: "synced", Base: base, Steady: st, SyncSeconds: took.Seconds(), SyncCPU: cpu.Seconds()})

	in := bufio.NewScanner(os.Stdin)
	for in.Scan() {
		var c command
		if err := json.Unmarshal(in.Bytes(), &c); err != nil {
			return fmt.Errorf("bad command %q: %v", in.Text(), err)
		}
		switch c.Cmd {
		case "burst":
			target := sub.updates() + c.K
			disk0, hasDisk := diskNow(sub)
			send(report{Event: "burst-armed"})
			bctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
			err := sub.waitUpdates(bctx, target)
			cancel()
			if err != nil {
				return fmt.Errorf("burst: saw %d of %d updates: %w", sub.updates()-(target-c.K), c.K, err)
			}
			done := report{Event: "burst-done", DoneUnixNano: time.Now().UnixNano()}
			if d, ok := diskNow(sub); ok && hasDisk {
				d.Events, d.Commits = c.K, d.Commits-disk0.Commits
				d.WriteBytes, d.WChar = d.WriteBytes-disk0.WriteBytes, d.WChar-disk0.WChar
				done.Disk = &d
			}
			send(done)
		case "relist":
			// The bare list relists when told to ("go"), after the parent
			// has restarted the apiserver, as the others relist after it.
			ready := func() error { return nil }
			if bare(kind) {
				ready = func() error {
					if !in.Scan() {
						return fmt.Errorf("relist: no go from the parent: %v", in.Err())
					}
					if string(in.Bytes()) != `{"cmd":"go"}` {
						return fmt.Errorf("relist: got %q; want go", in.Text())
					}
					return nil
				}
			}
			r, err := relist(ctx, sub, n, prof, send, ready)
			if err != nil {
				return err
			}
			send(r)
		case "exit":
			send(report{Event: "bye"})
			return nil
		default:
			return fmt.Errorf("unknown command %q", c.Cmd)
		}
	}
	return in.Err()
}

// relist arms the subject and the sampler, tells the parent, and waits for
// the relist the parent forces.
func relist(ctx context.Context, sub subject, n int, prof profiler, send func(report), ready func() error) (report, error) {
	reqs := sub.counts()
	runtime.GC()
	reset := resetHWM()
	lists, watchLists, pages := reqs.lists.Load(), reqs.watchLists.Load(), reqs.pages.Load()
	sub.armRelist()
	const interval = 50 * time.Millisecond
	var onPeak func()
	if prof.dir != "" {
		onPeak = func() { prof.heap("heap-relist-peak") }
	}
	s := startSampler(interval, onPeak)
	stopCPU := prof.cpu("cpu-relist")
	armed, cpu0, gc0 := time.Now(), cpuTime(), gcCycles()
	send(report{Event: "relist-armed"})
	if err := ready(); err != nil {
		return report{}, err
	}
	rctx, cancel := context.WithTimeout(ctx, syncTimeout(n)+2*time.Minute)
	info, err := sub.waitRelist(rctx)
	cpu, gcs := cpuTime()-cpu0, gcCycles()-gc0
	cancel()
	stopCPU()
	ss := s.stop()
	hwm := procStatus().HWM
	if err != nil {
		return report{}, err
	}
	peakHeap, peakLive, peakRSS, samples := peaks(ss, info.Start, info.End, interval)
	armHeap, armLive, armRSS, _ := peaks(ss, time.Time{}, info.End, interval)
	prof.heap("heap-relist")
	r := report{
		Event: "relisted", SinceArmSeconds: info.End.Sub(armed).Seconds(), RelistCPU: cpu.Seconds(),
		PeakHeap: peakHeap, PeakLive: peakLive, PeakRSS: peakRSS, HWM: hwm, HWMReset: reset, Samples: samples, GCCycles: gcs,
		ArmPeakHeap: armHeap, ArmPeakLive: armLive, ArmPeakRSS: armRSS,
		Gone: info.Gone, Lists: reqs.lists.Load() - lists, WatchLists: reqs.watchLists.Load() - watchLists,
		Pages: reqs.pages.Load() - pages, Note: info.Note,
	}
	if !info.Start.IsZero() {
		r.RelistSeconds = info.End.Sub(info.Start).Seconds()
	}
	r.After = steady()
	return r, nil
}

// syncTimeout bounds a full list of n objects generously.
func syncTimeout(n int) time.Duration { return 2*time.Minute + time.Duration(n)*time.Millisecond }

// profiler writes CPU and heap profiles to dir when dir is set.
type profiler struct{ dir, tag string }

func (p profiler) path(file string) string { return filepath.Join(p.dir, p.tag+"-"+file) }

// cpu starts a CPU profile, with an execution trace (runtime/trace) beside
// it when BENCH_TRACE=1, and returns the function that stops them. The
// trace shows where goroutines wait off-CPU, which a CPU profile cannot:
// go tool trace -pprof=syscall|sync|net|sched FILE.
func (p profiler) cpu(name string) func() {
	if p.dir == "" {
		return func() {}
	}
	stopCPU := p.start(name+".pprof", pprof.StartCPUProfile, pprof.StopCPUProfile)
	if stopCPU == nil {
		return func() {}
	}
	if os.Getenv(envTrace) == "1" {
		if stopTrace := p.start(name+".trace", trace.Start, trace.Stop); stopTrace != nil {
			return func() { stopTrace(); stopCPU() }
		}
	}
	return stopCPU
}

// start creates file and starts writing it with start; it returns the
// function that stops and closes it, or nil when either failed.
func (p profiler) start(file string, start func(io.Writer) error, stop func()) func() {
	f, err := os.Create(p.path(file))
	if err == nil {
		if err = start(f); err == nil {
			return func() { stop(); _ = f.Close() }
		}
		_ = f.Close()
	}
	fmt.Fprintf(os.Stderr, "benchharness: %v\n", err)
	return nil
}

// heap writes a heap profile (in-use as of the last GC, and everything
// allocated since start).
func (p profiler) heap(name string) {
	if p.dir == "" {
		return
	}
	f, err := os.Create(p.path(name + ".pprof"))
	if err != nil {
		fmt.Fprintf(os.Stderr, "benchharness: %v\n", err)
		return
	}
	defer f.Close()
	if err := pprof.Lookup("heap").WriteTo(f, 0); err != nil {
		fmt.Fprintf(os.Stderr, "benchharness: %v\n", err)
	}
}
