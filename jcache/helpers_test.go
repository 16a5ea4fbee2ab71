package jcache_test

// Scaffolding shared by the tests: one way to build a cache or a
// manager, start it, wait for its sync and stop it, to add a handler, to
// change a ConfigMap and to keep what a logger writes, so that each test
// reads as what it does with the running thing. A start's stop is
// registered as a cleanup too and runs once, so that a test failing
// half-way leaves no goroutine behind.

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/go-logr/logr/funcr"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	crcache "sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
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
	s := runUntilStopped(t, ctx, cancel, "Start", c.Start)
	waitSynced(t, c, 30*time.Second)
	return &running{c: c, stop: s.stop}
}

// newManager builds a manager on cfg from o, with no metrics or health
// listener and controller names that may repeat across tests.
func newManager(t *testing.T, cfg *rest.Config, o ctrl.Options) manager.Manager {
	t.Helper()
	o.Metrics = metricsserver.Options{BindAddress: "0"}
	o.HealthProbeBindAddress = "0"
	o.Controller.SkipNameValidation = ptr.To(true)
	mgr, err := ctrl.NewManager(cfg, o)
	if err != nil {
		t.Fatal(err)
	}
	return mgr
}

// started is a Start running in a goroutine.
type started struct {
	// done receives Start's result; a reader other than stop puts it
	// back.
	done chan error
	// stop cancels Start's context and waits for it, failing the test if
	// it returned an error; it runs once, also as a cleanup.
	stop func()
}

// runManager starts mgr.
func runManager(t *testing.T, mgr manager.Manager) *started {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	return runUntilStopped(t, ctx, cancel, "manager Start", mgr.Start)
}

// runUntilStopped runs start(ctx) in a goroutine, reporting its error as
// what; its stop calls cancel.
func runUntilStopped(t *testing.T, ctx context.Context, cancel context.CancelFunc, what string, start func(context.Context) error) *started {
	t.Helper()
	s := &started{done: make(chan error, 1)}
	go func() { s.done <- start(ctx) }()
	var once sync.Once
	s.stop = func() {
		once.Do(func() {
			cancel()
			if err := <-s.done; err != nil {
				t.Errorf("%s = %v", what, err)
			}
		})
	}
	t.Cleanup(s.stop)
	return s
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

// getInformer returns c's informer of obj, got with opts.
func getInformer(t *testing.T, ctx context.Context, c crcache.Informers, obj client.Object, opts ...crcache.InformerGetOption) crcache.Informer {
	t.Helper()
	inf, err := c.GetInformer(ctx, obj, opts...)
	if err != nil {
		t.Fatal(err)
	}
	return inf
}

// addHandler adds h to c's informer of obj, got with opts, and returns its
// registration.
func addHandler(t *testing.T, ctx context.Context, c crcache.Informers, obj client.Object, h toolscache.ResourceEventHandler, opts ...crcache.InformerGetOption) toolscache.ResourceEventHandlerRegistration {
	t.Helper()
	reg, err := getInformer(t, ctx, c, obj, opts...).AddEventHandler(h)
	if err != nil {
		t.Fatal(err)
	}
	return reg
}

// updateCM reads the ConfigMap ns/name, changes it with change and
// updates it.
func updateCM(t *testing.T, ctx context.Context, kube kubernetes.Interface, ns, name string, change func(*corev1.ConfigMap)) {
	t.Helper()
	cm, err := kube.CoreV1().ConfigMaps(ns).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	change(cm)
	if _, err := kube.CoreV1().ConfigMaps(ns).Update(ctx, cm, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// deleteCM deletes the ConfigMap ns/name.
func deleteCM(t *testing.T, ctx context.Context, kube kubernetes.Interface, ns, name string) {
	t.Helper()
	if err := kube.CoreV1().ConfigMaps(ns).Delete(ctx, name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
}

// logLines is a logger that keeps its lines.
type logLines struct {
	mu    sync.Mutex
	lines []string
}

// logger returns a logger that appends each line's message and values
// to l.
func (l *logLines) logger() logr.Logger {
	return funcr.New(func(prefix, args string) {
		l.mu.Lock()
		l.lines = append(l.lines, args)
		l.mu.Unlock()
	}, funcr.Options{})
}

// find returns the first line kept that holds s; "" when none does.
func (l *logLines) find(s string) string {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, line := range l.lines {
		if strings.Contains(line, s) {
			return line
		}
	}
	return ""
}

// all returns the lines kept so far.
func (l *logLines) all() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]string(nil), l.lines...)
}

// each runs f(0..n-1), at most at of them at a time, and fails the test
// on an error.
func each(t *testing.T, n, at int, f func(i int) error) {
	t.Helper()
	var wg sync.WaitGroup
	errs := make(chan error, n)
	sem := make(chan struct{}, at)
	for i := range n {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			if err := f(i); err != nil {
				errs <- err
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
}
