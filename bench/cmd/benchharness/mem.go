package main

// Memory of the calling process: the Go heap from the runtime, the
// resident set from /proc/self/status.

import (
	"bufio"
	"bytes"
	"os"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// cpuTime returns the CPU time (user + system) the process has used.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// gcCycles returns how many GC cycles the process has completed.
func gcCycles() uint64 { return metric("/gc/cycles/total:gc-cycles") }

// heapLive returns the heap the last GC found live (/gc/heap/live:bytes).
func heapLive() uint64 { return metric("/gc/heap/live:bytes") }

// metric reads a runtime/metrics value of kind uint64; 0 when it has none.
func metric(name string) uint64 {
	x := []metrics.Sample{{Name: name}}
	metrics.Read(x)
	if x[0].Value.Kind() != metrics.KindUint64 {
		return 0
	}
	return x[0].Value.Uint64()
}

// memory is one measurement, in bytes.
type memory struct {
	// HeapInuse is runtime.MemStats.HeapInuse: bytes in in-use heap spans.
	HeapInuse uint64 `json:"heapInuse"`
	// HeapAlloc is runtime.MemStats.HeapAlloc: bytes of allocated objects,
	// garbage not yet swept included.
	HeapAlloc uint64 `json:"heapAlloc"`
	// HeapLive is /gc/heap/live:bytes: the heap the last GC found live.
	HeapLive uint64 `json:"heapLive"`
	// RSS, RSSAnon and RSSFile are VmRSS, RssAnon and RssFile (file-backed
	// pages, e.g. bbolt's memory map) of /proc/self/status.
	RSS     uint64 `json:"rss"`
	RSSAnon uint64 `json:"rssAnon"`
	RSSFile uint64 `json:"rssFile"`
	// HWM is VmHWM, the peak resident set since start or the last
	// resetHWM.
	HWM uint64 `json:"hwm"`
}

// steady collects garbage, returns freed memory to the OS, and measures:
// the memory a long-running process holds once it has settled.
func steady() memory {
	runtime.GC()
	debug.FreeOSMemory()
	return measure()
}

// measure reads the heap and the resident set as they are now.
func measure() memory {
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	m := procStatus()
	m.HeapInuse, m.HeapAlloc, m.HeapLive = ms.HeapInuse, ms.HeapAlloc, heapLive()
	return m
}

// procStatus reads VmRSS, RssAnon, RssFile and VmHWM of this process.
func procStatus() memory { return statusFile("/proc/self/status") }

// statusFile reads VmRSS, RssAnon, RssFile and VmHWM from a
// /proc/<pid>/status file; zero where missing.
func statusFile(path string) memory {
	var m memory
	b, err := os.ReadFile(path)
	if err != nil {
		return m
	}
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		f := bytes.Fields(sc.Bytes())
		if len(f) < 2 {
			continue
		}
		kb, err := strconv.ParseUint(string(f[1]), 10, 64)
		if err != nil {
			continue
		}
		switch string(f[0]) {
		case "VmRSS:":
			m.RSS = kb << 10
		case "RssAnon:":
			m.RSSAnon = kb << 10
		case "RssFile:":
			m.RSSFile = kb << 10
		case "VmHWM:":
			m.HWM = kb << 10
		}
	}
	return m
}

// resetHWM resets VmHWM to the current resident set (clear_refs value 5,
// Linux 4.0+). It reports false when the kernel refused.
func resetHWM() bool {
	return os.WriteFile("/proc/self/clear_refs", []byte("5"), 0) == nil
}

// sample is one measurement by a sampler.
type sample struct {
	at                   time.Time
	heapInuse, live, rss uint64
}

// sampler measures the heap and the resident set every interval, from one
// goroutine that exits on stop, and once more after every GC cycle, so that
// the live heap each cycle found is never missed between two ticks. (The
// GC hook is a finalizer on a sentinel that re-arms itself: finalizers run
// after the cycle that found their object unreachable.)
type sampler struct {
	stopc   chan struct{}
	done    chan struct{}
	stopped atomic.Bool

	mu      sync.Mutex
	samples []sample

	// onPeak, when set, is called (from the GC hook) each time the live
	// heap reaches a new high by more than 5%: the relist writes a heap
	// profile there, so the profile shows what the peak was made of.
	onPeak   func()
	peakLive uint64
}

func startSampler(interval time.Duration, onPeak func()) *sampler {
	s := &sampler{stopc: make(chan struct{}), done: make(chan struct{}), onPeak: onPeak}
	s.sample()
	s.armGC()
	go func() {
		defer close(s.done)
		t := time.NewTicker(interval)
		defer t.Stop()
		for {
			select {
			case <-s.stopc:
				return
			case <-t.C:
				s.sample()
			}
		}
	}()
	return s
}

// gcSentinel is big enough, and holds a pointer, so that it is never a
// tiny allocation (whose finalizer may not run).
type gcSentinel struct {
	_ [16]byte
	p *int
}

func (s *sampler) armGC() {
	x := &gcSentinel{}
	runtime.SetFinalizer(x, func(*gcSentinel) {
		if s.stopped.Load() {
			return
		}
		s.sampleLive()
		s.armGC()
	})
}

// sampleLive records only the live heap the last GC found: cheap enough for
// every cycle (no stop-the-world, no /proc read).
func (s *sampler) sampleLive() {
	v := heapLive()
	s.mu.Lock()
	s.samples = append(s.samples, sample{at: time.Now(), live: v})
	peak := s.onPeak != nil && v > s.peakLive+s.peakLive/20
	if peak {
		s.peakLive = v
	}
	s.mu.Unlock()
	if peak {
		s.onPeak()
	}
}

func (s *sampler) sample() {
	m := measure()
	s.mu.Lock()
	s.samples = append(s.samples, sample{at: time.Now(), heapInuse: m.HeapInuse, live: m.HeapLive, rss: m.RSS})
	s.mu.Unlock()
}

// stop takes a last sample, ends the goroutine and returns the samples.
func (s *sampler) stop() []sample {
	s.stopped.Store(true)
	close(s.stopc)
	<-s.done
	s.sample()
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.samples
}

// peaks returns the largest values of the samples taken from one interval
// before from until the first sample at or after to (all samples when from
// is zero), and how many samples that was.
func peaks(ss []sample, from, to time.Time, interval time.Duration) (heapInuse, live, rss uint64, n int) {
	for _, x := range ss {
		if !from.IsZero() && x.at.Before(from.Add(-interval)) {
			continue
		}
		heapInuse, live, rss = max(heapInuse, x.heapInuse), max(live, x.live), max(rss, x.rss)
		n++
		if !x.at.Before(to) {
			break
		}
	}
	return heapInuse, live, rss, n
}
