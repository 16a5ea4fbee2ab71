package jcache_test

// Scaffolding shared by the tests that start a cache or a manager: one
// way to build, start, wait for the sync and stop, so that each test
// reads as what it does with the running thing. A start's stop is
// registered as a cleanup too and runs once, so that a test failing
// half-way leaves no goroutine behind.

import (
	"context"
	"sync"
	"testing"
	"time"

	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	crcache "sigs.k8s.io/controller-runtime/pkg/cache"
	ctrlconfig "sigs.k8s.io/controller-runtime/pkg/config"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
)

// startWith builds a cache on cfg, lets prepare (when not nil) register on
// it before it starts, starts it and waits up to 30 s for its sync.
func startWith(t *testing.T, newCache crcache.NewCacheFunc, cfg *rest.Config, opts crcache.Options, prepare func(context.Context, crcache.Cache) error) *running {
	t.Helper()
	c, err := newCache(cfg, opts)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	if prepare != nil {
		if err := prepare(ctx, c); err != nil {
			cancel()
			t.Fatal(err)
		}
	}
	stop := runUntilStopped(t, ctx, cancel, "Start", c.Start)
	waitSynced(t, c, 30*time.Second)
	return &running{c: c, stop: stop}
}

// newManager builds a manager on cfg from o, with no metrics or health
// listener and controller names that may repeat across tests.
func newManager(t *testing.T, cfg *rest.Config, o ctrl.Options) manager.Manager {
	t.Helper()
	o.Metrics = metricsserver.Options{BindAddress: "0"}
	o.HealthProbeBindAddress = "0"
	o.Controller = ctrlconfig.Controller{SkipNameValidation: ptr.To(true)}
	mgr, err := ctrl.NewManager(cfg, o)
	if err != nil {
		t.Fatal(err)
	}
	return mgr
}

// runManager starts mgr; stop cancels it and waits, failing the test if
// its Start returned an error.
func runManager(t *testing.T, mgr manager.Manager) (stop func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	return runUntilStopped(t, ctx, cancel, "manager Start", mgr.Start)
}

// runUntilStopped runs start(ctx) in a goroutine; the stop it returns (also
// a cleanup, run once) calls cancel and waits, reporting start's error as
// what.
func runUntilStopped(t *testing.T, ctx context.Context, cancel context.CancelFunc, what string, start func(context.Context) error) (stop func()) {
	done := make(chan error, 1)
	go func() { done <- start(ctx) }()
	var once sync.Once
	stop = func() {
		once.Do(func() {
			cancel()
			if err := <-done; err != nil {
				t.Errorf("%s = %v", what, err)
			}
		})
	}
	t.Cleanup(stop)
	return stop
}

// waitSynced waits up to within for c's caches to sync, failing the test
// if they do not.
func waitSynced(t *testing.T, c interface{ WaitForCacheSync(context.Context) bool }, within time.Duration) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), within)
	defer cancel()
	if !c.WaitForCacheSync(ctx) {
		t.Fatalf("the cache did not sync within %v", within)
	}
}
