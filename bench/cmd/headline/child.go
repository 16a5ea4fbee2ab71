package main

// The operator process. It reports JSON lines on stdout (report) and
// stops when its stdin closes: the manager stops, the cache closes its
// files, and it exits 0.

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime/metrics"
	"runtime/pprof"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/watchjournal/watchjournal/jcache"
)

// report is one line a child writes; T is its time (Unix nanoseconds).
type report struct {
	Event string `json:"event"` // start, ready, first, progress, all, idle, bye
	T     int64  `json:"t"`
	// Distinct is how many of the n objects were reconciled at least
	// once; Reconciles how many reconciles ran.
	Distinct   int64  `json:"distinct,omitempty"`
	Reconciles int64  `json:"reconciles,omitempty"`
	Err        string `json:"err,omitempty"`
}

var (
	outMu sync.Mutex
	out   = json.NewEncoder(os.Stdout)
)

func send(r report) {
	r.T = time.Now().UnixNano()
	outMu.Lock()
	defer outMu.Unlock()
	_ = out.Encode(r)
}

// counter counts reconciles, and the distinct objects among them.
type counter struct {
	n          int64
	seen       []atomic.Uint64 // a bit per object
	distinct   atomic.Int64
	reconciles atomic.Int64
	first      sync.Once
	all        chan struct{}
}

func newCounter(n int) *counter {
	return &counter{n: int64(n), seen: make([]atomic.Uint64, (n+63)/64), all: make(chan struct{})}
}

func (c *counter) mark(name string) {
	c.reconciles.Add(1)
	c.first.Do(func() { send(report{Event: "first"}) })
	i := objectIndex(name)
	if i < 0 || int64(i) >= c.n {
		return
	}
	w, bit := &c.seen[i/64], uint64(1)<<(i%64)
	for {
		old := w.Load()
		if old&bit != 0 {
			return
		}
		if w.CompareAndSwap(old, old|bit) {
			break
		}
	}
	if c.distinct.Add(1) == c.n {
		close(c.all)
	}
}

// reconciler is the operator's: it reads the object it was given through
// the manager's client, as reconcilers do, and counts.
type reconciler struct {
	c      client.Client
	newObj func() client.Object
	cnt    *counter
}

func (r *reconciler) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	if err := r.c.Get(ctx, req.NamespacedName, r.newObj()); err != nil {
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	if strings.HasPrefix(req.Namespace, "headline-") {
		r.cnt.mark(req.Name)
	}
	return reconcile.Result{}, nil
}

// readySource is an Exact source that reports when its WaitForSync
// returned: from then on controller-runtime runs the workers.
type readySource struct {
	*jcache.ExactSource
	ready chan struct{}
	cnt   *counter
}

func (s readySource) WaitForSync(ctx context.Context) error {
	err := s.ExactSource.WaitForSync(ctx)
	if err == nil {
		send(report{Event: "ready"})
		close(s.ready)
	}
	return err
}

// errorSink is a logr.LogSink that writes errors to stderr and drops the
// rest.
type errorSink struct{}

func (errorSink) Init(logr.RuntimeInfo)            {}
func (errorSink) Enabled(int) bool                 { return false }
func (errorSink) Info(int, string, ...any)         {}
func (s errorSink) WithValues(...any) logr.LogSink { return s }
func (s errorSink) WithName(string) logr.LogSink   { return s }
func (errorSink) Error(err error, msg string, kv ...any) {
	fmt.Fprintf(os.Stderr, "%s headline child: %s: %v %v\n", time.Now().Format("15:04:05"), msg, err, kv)
}

func childMain(kind string) error {
	// The parent moves this process into its cgroup, then writes one
	// byte: nothing is allocated outside the limit.
	if _, err := os.Stdin.Read(make([]byte, 1)); err != nil {
		return fmt.Errorf("waiting for the parent: %w", err)
	}
	send(report{Event: "start"})
	n, err := strconv.Atoi(os.Getenv(envN))
	if err != nil {
		return fmt.Errorf("%s: %w", envN, err)
	}
	ctrl.SetLogger(logr.New(errorSink{}))
	cfg, err := ctrl.GetConfig() // KUBECONFIG, as an operator out of cluster
	if err != nil {
		return err
	}
	newObj := func() client.Object { return &corev1.ConfigMap{} }
	jo := jcache.Options{Dir: os.Getenv(envDir)}
	if os.Getenv(envKind) == kindSecrets {
		newObj = func() client.Object { return &corev1.Secret{} }
	}
	if os.Getenv(envKind) == kindSecrets && jo.Dir != "" {
		// Sealed on disk, with a key file as a mounted Secret gives it.
		keyFile := filepath.Clean(jo.Dir) + ".key"
		if _, err := os.Stat(keyFile); err != nil {
			key := make([]byte, 32)
			if _, err := rand.Read(key); err != nil {
				return err
			}
			if err := os.WriteFile(keyFile, key, 0o600); err != nil {
				return err
			}
		}
		jo.KeyFiles, jo.SecretPayloads = []string{keyFile}, true
	}
	opts := ctrl.Options{Metrics: metricsserver.Options{BindAddress: "0"}, HealthProbeBindAddress: "0"}
	exact := false
	switch kind {
	case caseCR, caseCRNoLimit:
	case caseDropIn, caseDropInRe, caseDropInNoL:
		opts.NewCache = jcache.NewFunc(jo)
	case caseExact, caseExactRe:
		opts.NewCache = jcache.NewFunc(jo)
		exact = true
	default:
		return fmt.Errorf("unknown case %q", kind)
	}
	mgr, err := ctrl.NewManager(cfg, opts)
	if err != nil {
		return err
	}
	cnt := newCounter(n)
	rec := &reconciler{c: mgr.GetClient(), newObj: newObj, cnt: cnt}
	b := ctrl.NewControllerManagedBy(mgr).Named("headline")
	var src readySource
	if exact {
		ex := jcache.Exact(mgr.GetCache(), "headline")
		src = readySource{ExactSource: ex.Kind(newObj(), &handler.EnqueueRequestForObject{}), ready: make(chan struct{}), cnt: cnt}
		err = b.WatchesRawSource(src).Complete(ex.Reconciler(rec))
	} else {
		err = b.For(newObj()).Complete(rec)
	}
	if err != nil {
		return err
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	stopped := make(chan error, 1)
	go func() { stopped <- mgr.Start(ctx) }()
	exit := make(chan struct{})
	go func() { _, _ = io.Copy(io.Discard, os.Stdin); close(exit) }()
	go func() {
		for range time.Tick(5 * time.Second) {
			send(report{Event: "progress", Distinct: cnt.distinct.Load(), Reconciles: cnt.reconciles.Load()})
		}
	}()
	if exact {
		go idle(ctx, src)
	}
	if dir := os.Getenv(envPprof); dir != "" {
		go heapProfiles(ctx, dir, kind)
	}
	select {
	case <-exit:
	case err := <-stopped:
		return fmt.Errorf("manager stopped: %v", err)
	case <-cnt.all:
		send(report{Event: "all", Distinct: cnt.distinct.Load(), Reconciles: cnt.reconciles.Load()})
		select {
		case <-exit:
		case err := <-stopped:
			return fmt.Errorf("manager stopped: %v", err)
		}
	}
	cancel()
	select {
	case err := <-stopped:
		if err != nil {
			return fmt.Errorf("manager: %w", err)
		}
	case <-time.After(time.Minute):
		return fmt.Errorf("the manager did not stop within a minute")
	}
	send(report{Event: "bye", Distinct: cnt.distinct.Load(), Reconciles: cnt.reconciles.Load()})
	return nil
}

// idle reports, once the source is ready, when its consumer has committed
// every event in the file: nothing is left to reconcile.
func idle(ctx context.Context, src readySource) {
	select {
	case <-ctx.Done():
		return
	case <-src.ready:
	}
	for ctx.Err() == nil {
		c, err := src.Committed()
		var h uint64
		if j := src.Journal(); j != nil && err == nil {
			h, err = j.Head()
		}
		if err == nil && h > 0 && c == h {
			send(report{Event: "idle", Distinct: src.cnt.distinct.Load(), Reconciles: src.cnt.reconciles.Load()})
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// heapProfiles writes a heap profile into dir every 10 s, named
// heap-<case>-<seconds>.pb.gz, and one each time the live heap (as the
// last GC found it, read every 100 ms) passes 1.25× the largest profiled
// so far, named heap-<case>-peak-<MiB>.pb.gz: the last of those shows
// what held the peak.
func heapProfiles(ctx context.Context, dir, kind string) {
	began := time.Now()
	write := func(name string) {
		f, err := os.Create(filepath.Join(dir, name))
		if err != nil {
			return
		}
		_ = pprof.Lookup("heap").WriteTo(f, 0)
		f.Close()
	}
	t := time.NewTicker(100 * time.Millisecond)
	defer t.Stop()
	live := []metrics.Sample{{Name: "/gc/heap/live:bytes"}}
	var peak uint64 = 16 << 20
	for i := 1; ; i++ {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		metrics.Read(live)
		if v := live[0].Value.Uint64(); v > peak*5/4 {
			peak = v
			write(fmt.Sprintf("heap-%s-peak-%04d.pb.gz", kind, v>>20))
		}
		if i%100 == 0 {
			write(fmt.Sprintf("heap-%s-%03.0f.pb.gz", kind, time.Since(began).Seconds()))
		}
	}
}
