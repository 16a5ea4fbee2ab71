package controlplane

// spare: a control plane started ahead of the test that will use it.
//
// Starting one takes seconds, most of it the apiserver's post-start hooks,
// and a package of tests that each need a fresh one would wait that long
// per test. A package that runs its tests with RunWithSpare has, while a
// test runs, the next test's control plane starting beside it: StartT with
// default Options takes the spare (waiting for it if it is still
// starting) and starts the next one. Each test still gets a control plane
// of its own, empty, that no other test touches. A spare that failed to
// start is dropped, and the test starts its own as without the pool.
// RunWithSpare stops the last spare and removes its directory after the
// tests; without RunWithSpare, StartT starts in the test, as before.

import (
	"context"
	"os"
	"sync"
	"testing"
)

// spareResult is a finished start of a spare: the control plane or the
// error, and the directory to remove once it stops.
type spareResult struct {
	c   *ControlPlane
	dir string
	err error
}

// pool is the package's one spare; on is set by RunWithSpare.
var pool struct {
	mu    sync.Mutex
	on    bool
	next  chan spareResult // the spare starting or started; nil: none
	taken int              // spares given to tests (for this package's tests)
}

// RunWithSpare runs m's tests with a spare control plane starting ahead
// of each test that calls StartT with default Options, and returns m.Run's
// exit code once the last spare is stopped. Call it from TestMain:
//
//	func TestMain(m *testing.M) { os.Exit(controlplane.RunWithSpare(m)) }
func RunWithSpare(m *testing.M) int {
	pool.mu.Lock()
	pool.on = true
	pool.mu.Unlock()
	code := m.Run()
	pool.mu.Lock()
	pool.on = false
	next := pool.next
	pool.next = nil
	pool.mu.Unlock()
	if next != nil {
		if r := <-next; r.c != nil {
			r.c.Stop()
			_ = os.RemoveAll(r.dir)
		}
	}
	return code
}

// pooled reports whether opts is the spares' configuration: the zero
// Options, but for Logf.
func pooled(opts Options) bool {
	return !opts.WatchCache && opts.BinDir == "" && len(opts.ExtraAPIServerArgs) == 0 &&
		len(opts.ExtraTokens) == 0 && opts.APIServerReadyTimeout == 0 && !opts.KeepData
}

// takeSpare returns the spare control plane and its directory, and starts
// the next spare; ok is false when the pool is off, opts is not pooled, or
// the spare failed to start (then the caller starts its own).
func takeSpare(opts Options) (c *ControlPlane, dir string, ok bool) {
	if !pooled(opts) {
		return nil, "", false
	}
	pool.mu.Lock()
	if !pool.on {
		pool.mu.Unlock()
		return nil, "", false
	}
	cur := pool.next
	pool.next = startSpare()
	pool.mu.Unlock()
	if cur == nil {
		return nil, "", false // the first test starts its own, beside the first spare
	}
	r := <-cur
	if r.err != nil {
		_ = os.RemoveAll(r.dir)
		return nil, "", false
	}
	r.c.opts.Logf = opts.Logf
	pool.mu.Lock()
	pool.taken++
	pool.mu.Unlock()
	return r.c, r.dir, true
}

// startSpare starts a control plane in the background, in a directory of
// its own (no test owns it yet).
func startSpare() chan spareResult {
	ch := make(chan spareResult, 1)
	go func() {
		dir, err := os.MkdirTemp("", "controlplane-spare-")
		if err != nil {
			ch <- spareResult{err: err}
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), startTimeout)
		defer cancel()
		c, err := Start(ctx, dir, Options{})
		ch <- spareResult{c: c, dir: dir, err: err}
	}()
	return ch
}
