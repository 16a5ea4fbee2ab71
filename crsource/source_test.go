package crsource_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/go-logr/logr/testr"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	ctrlconfig "sigs.k8s.io/controller-runtime/pkg/config"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/watchjournal/watchjournal/crsource"
	"github.com/watchjournal/watchjournal/internal/testing/controlplane"
	"github.com/watchjournal/watchjournal/journal"
)

// recorder is a Reconciler that records every request's name and answers
// with outcome (nil: success).
type recorder struct {
	mu      sync.Mutex
	seen    map[string]int
	changed chan struct{}
	outcome func(name string) (reconcile.Result, error)
}

func newRecorder(outcome func(string) (reconcile.Result, error)) *recorder {
	return &recorder{seen: map[string]int{}, changed: make(chan struct{}, 1), outcome: outcome}
}

func (r *recorder) Reconcile(_ context.Context, req reconcile.Request) (reconcile.Result, error) {
	r.mu.Lock()
	r.seen[req.Name]++
	r.mu.Unlock()
	select {
	case r.changed <- struct{}{}:
	default:
	}
	if r.outcome != nil {
		return r.outcome(req.Name)
	}
	return reconcile.Result{}, nil
}

func (r *recorder) names() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []string
	for n := range r.seen {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

// waitFor polls cond on every reconcile and every 100 ms (the commit is
// written by another goroutine) until it holds or 60 s pass.
func waitFor(t *testing.T, r *recorder, what string, cond func() bool, state func() any) {
	t.Helper()
	deadline := time.After(60 * time.Second)
	for !cond() {
		select {
		case <-r.changed:
		case <-time.After(100 * time.Millisecond):
		case <-deadline:
			t.Fatalf("timed out waiting for %s; last state %v", what, state())
		}
	}
}

// startManager runs a real controller-runtime manager with one controller
// fed by a new Source on path, as a new process would.
func startManager(t *testing.T, cp *controlplane.ControlPlane, path string, res journal.Resource, r *recorder) (*crsource.Source, func()) {
	t.Helper()
	src, err := crsource.New(cp.RESTConfig(), crsource.Options{Path: path, Resource: res, NoSync: true,
		Loop: crsource.LoopOptions{MinBackoff: 20 * time.Millisecond, MaxBackoff: 300 * time.Millisecond, Logger: testr.New(t)}})
	if err != nil {
		t.Fatal(err)
	}
	mgr, err := manager.New(cp.RESTConfig(), manager.Options{
		Metrics:                metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0",
		Controller:             ctrlconfig.Controller{SkipNameValidation: ptr.To(true)},
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := builder.ControllerManagedBy(mgr).Named("mirror").WatchesRawSource(src).Complete(src.Reconciler(r)); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- mgr.Start(ctx) }()
	return src, func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("manager Start = %v", err)
		}
		<-src.Done()
		if err := src.Err(); err != nil {
			t.Errorf("source Err = %v after a clean shutdown", err)
		}
	}
}

// A real manager and controller over the source: changes arrive as
// requests; an error and a requeue hold the commit back; after a restart
// (new journal, source and manager) the uncommitted requests and the
// changes made while down (a delete found by the restart relist included)
// are delivered, the committed ones are not.
func TestSource_CommitsOnlyReconciledRequests_AcrossRestart(t *testing.T) {
	ctrllog.SetLogger(logr.Discard())
	cp := controlplane.StartT(t, controlplane.Options{})
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	kube := kubernetes.NewForConfigOrDie(cp.RESTConfig())
	ns := "crs"
	if _, err := kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	cms := kube.CoreV1().ConfigMaps(ns)
	create := func(n string) {
		t.Helper()
		if _, err := cms.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: n}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	for _, n := range []string{"a", "b", "e"} {
		create(n)
	}
	path := filepath.Join(t.TempDir(), "cm.db")
	res := journal.Resource{GVR: schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}, Namespace: ns}

	// First process: "rq" asks for a requeue (Requeue: true, not done;
	// RequeueAfter completes: TestSource_RequeueAfterDoesNotPin), "bad"
	// fails; the rest succeed.
	r1 := newRecorder(func(n string) (reconcile.Result, error) {
		switch n {
		case "rq":
			return reconcile.Result{Requeue: true}, nil //nolint:staticcheck // Requeue is deprecated, still honoured
		case "bad":
			return reconcile.Result{}, errors.New("reconcile failed")
		}
		return reconcile.Result{}, nil
	})
	src, stop := startManager(t, cp, path, res, r1)
	j := src.Journal()
	state := func() any {
		c, _ := src.Committed()
		h, _ := j.Head()
		return map[string]any{"seen": r1.names(), "committed": c, "head": h}
	}
	waitFor(t, r1, "a, b, e reconciled and committed", func() bool {
		c, _ := src.Committed()
		h, _ := j.Head()
		return len(r1.names()) == 3 && h >= 3 && c == h
	}, state)
	h0, _ := j.Head()
	for _, n := range []string{"rq", "bad", "c"} {
		create(n)
	}
	waitFor(t, r1, "rq, bad, c reconciled, rq and bad retried", func() bool {
		r1.mu.Lock()
		defer r1.mu.Unlock()
		return r1.seen["rq"] > 1 && r1.seen["bad"] > 1 && r1.seen["c"] > 0
	}, state)
	if c, _ := src.Committed(); c != h0 {
		t.Fatalf("committed = %d with rq (requeue) and bad (error) at %d and %d; want %d", c, h0+1, h0+2, h0)
	}
	stop()

	// Down: d created, e deleted, etcd compacted: the restart relists.
	create("d")
	if err := cms.Delete(ctx, "e", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	create("f")
	if _, err := cp.Compact(ctx); err != nil {
		t.Fatal(err)
	}

	// Second process, everything succeeds.
	r2 := newRecorder(nil)
	src, stop = startManager(t, cp, path, res, r2)
	defer stop()
	j = src.Journal()
	want := []string{"bad", "c", "d", "e", "f", "rq"}
	state = func() any {
		c, _ := src.Committed()
		h, _ := j.Head()
		return map[string]any{"seen": r2.names(), "committed": c, "head": h}
	}
	waitFor(t, r2, "the uncommitted and the changed keys reconciled and committed", func() bool {
		c, _ := src.Committed()
		h, _ := j.Head()
		return len(r2.names()) >= len(want) && c == h && h > h0+3
	}, state)
	if got := r2.names(); !equal(got, want) {
		t.Fatalf("after the restart reconciled %v; want exactly %v (a and b were committed)", got, want)
	}
}

func equal(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// A controller built with Complete(r), the reconciler not wrapped by
// src.Reconciler, would never commit and, once MaxPending requests were
// outstanding, would receive no more, without an error or a log line. So
// the controller fails to start: the manager's Start returns
// ErrNotWrapped, whose message names the fix, before a single request is
// reconciled.
func TestSource_UnwrappedReconciler_ManagerStartFails(t *testing.T) {
	ctrllog.SetLogger(logr.Discard())
	cp := controlplane.StartT(t, controlplane.Options{})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	kube := kubernetes.NewForConfigOrDie(cp.RESTConfig())
	ns := "unwrapped"
	if _, err := kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 8; i++ {
		if _, err := kube.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("cm%d", i)}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	res := journal.Resource{GVR: schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}, Namespace: ns}
	src, err := crsource.New(cp.RESTConfig(), crsource.Options{Path: filepath.Join(t.TempDir(), "cm.db"), Resource: res, NoSync: true,
		MaxPending: 5, Loop: crsource.LoopOptions{MinBackoff: 20 * time.Millisecond, MaxBackoff: 300 * time.Millisecond, Logger: testr.New(t)}})
	if err != nil {
		t.Fatal(err)
	}
	mgr, err := manager.New(cp.RESTConfig(), manager.Options{
		Metrics:                metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0",
		Controller:             ctrlconfig.Controller{SkipNameValidation: ptr.To(true)},
	})
	if err != nil {
		t.Fatal(err)
	}
	r := newRecorder(nil)
	if err := builder.ControllerManagedBy(mgr).Named("unwrapped").WatchesRawSource(src).Complete(r); err != nil { // the mistake
		t.Fatal(err)
	}
	mctx, mcancel := context.WithTimeout(ctx, 60*time.Second)
	defer mcancel()
	err = mgr.Start(mctx)
	if !errors.Is(err, crsource.ErrNotWrapped) || !strings.Contains(err.Error(), "Complete(src.Reconciler(r))") {
		committed, _ := src.Committed()
		t.Fatalf("manager Start = %v (after %v; reconciled %v, committed %d); want ErrNotWrapped naming Complete(src.Reconciler(r))",
			err, mctx.Err(), r.names(), committed)
	}
	if got := r.names(); len(got) != 0 {
		t.Errorf("reconciled %v before the controller failed; want none", got)
	}
	<-src.Done()
}

// (Result{RequeueAfter: d}, nil) completes the events of
// its request, so a key that always asks to be looked at again ("tick",
// every 300 ms; "slow", in an hour) does not pin the commit, and its
// timer is kept in the timers file. A restart with nothing changed
// reconciles the due timer (tick) and nothing else.
func TestSource_RequeueAfterDoesNotPin(t *testing.T) {
	ctrllog.SetLogger(logr.Discard())
	cp := controlplane.StartT(t, controlplane.Options{})
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	kube := kubernetes.NewForConfigOrDie(cp.RESTConfig())
	ns := "rqa"
	if _, err := kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	cms := kube.CoreV1().ConfigMaps(ns)
	create := func(n string) {
		t.Helper()
		if _, err := cms.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: n}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	for _, n := range []string{"a", "slow", "tick"} {
		create(n)
	}
	path := filepath.Join(t.TempDir(), "cm.db")
	res := journal.Resource{GVR: schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}, Namespace: ns}
	outcome := func(n string) (reconcile.Result, error) {
		switch n {
		case "tick":
			return reconcile.Result{RequeueAfter: 300 * time.Millisecond}, nil
		case "slow":
			return reconcile.Result{RequeueAfter: time.Hour}, nil
		}
		return reconcile.Result{}, nil
	}
	r1 := newRecorder(outcome)
	src, stop := startManager(t, cp, path, res, r1)
	atHead := func() bool {
		c, _ := src.Committed()
		h, _ := src.Journal().Head()
		return h > 0 && c == h
	}
	state := func(r *recorder) func() any {
		return func() any {
			c, _ := src.Committed()
			h, _ := src.Journal().Head()
			r.mu.Lock()
			defer r.mu.Unlock()
			return fmt.Sprint(r.seen, " committed ", c, " head ", h)
		}
	}
	waitFor(t, r1, "all reconciled, tick three times, the commit at the head", func() bool {
		r1.mu.Lock()
		n, ticks := len(r1.seen), r1.seen["tick"]
		r1.mu.Unlock()
		return n == 3 && ticks >= 3 && atHead()
	}, state(r1))
	create("b")
	waitFor(t, r1, "b reconciled and committed", func() bool {
		r1.mu.Lock()
		b := r1.seen["b"]
		r1.mu.Unlock()
		return b > 0 && atHead()
	}, state(r1))
	stop()

	tm, err := os.ReadFile(crsource.TimersPath(path, crsource.DefaultConsumer))
	if err != nil {
		t.Fatal(err)
	}
	var f struct {
		Timers []struct {
			Name string
			Due  time.Time
		}
	}
	if err := json.Unmarshal(tm, &f); err != nil {
		t.Fatal(err)
	}
	due := map[string]time.Time{}
	for _, e := range f.Timers {
		due[e.Name] = e.Due
	}
	if len(due) != 2 || due["tick"].IsZero() || time.Until(due["slow"]) < 50*time.Minute {
		t.Fatalf("timers file %s; want tick and slow (due in about an hour)", tm)
	}
	time.Sleep(time.Until(due["tick"])) // the condition is the clock

	r2 := newRecorder(outcome)
	src, stop = startManager(t, cp, path, res, r2)
	defer stop()
	waitFor(t, r2, "tick's timer fired", func() bool {
		r2.mu.Lock()
		defer r2.mu.Unlock()
		return r2.seen["tick"] > 0
	}, state(r2))
	// A change after the start: once it is reconciled and committed,
	// whatever the restart queued from the journal has been reconciled.
	create("c")
	waitFor(t, r2, "c reconciled and committed", func() bool {
		r2.mu.Lock()
		c := r2.seen["c"]
		r2.mu.Unlock()
		return c > 0 && atHead()
	}, state(r2))
	if got := r2.names(); !equal(got, []string{"c", "tick"}) {
		t.Fatalf("after a restart with nothing changed but c (after the start) reconciled %v; want c and tick (timer due), not slow (due in an hour), a or b", got)
	}
}
