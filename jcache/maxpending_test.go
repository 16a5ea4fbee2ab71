package jcache_test

// Exact over more objects than ExactOptions.MaxPending, through a real
// manager: controller-runtime starts a controller's workers only after
// every source's WaitForSync returned, so a source whose WaitForSync
// waits for a feed that waits for the workers never starts. Each way a
// feed can be full before it follows is a case: the first start's
// replay, a restart before any commit (a replay again), a restart after
// a commit with more changes than MaxPending, and a standby takeover
// (the leader's first start replays through the standby's start).

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/go-logr/logr/testr"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/watchjournal/watchjournal/internal/testing/controlplane"
	"github.com/watchjournal/watchjournal/internal/testing/standbytest"
	"github.com/watchjournal/watchjournal/jcache"
)

const (
	mpObjects = 500
	mpMax     = 10
	mpChanged = 100 // changed while down: more than mpMax
)

// mpRun is one process of the operator: a manager on the journal cache in
// dir with the controller "mirror" built by the builder (WatchesRawSource
// of one Exact source of ConfigMaps, MaxPending mpMax), whose reconciler
// records the names of namespace ns and answers with fail (nil: success).
type mpRun struct {
	src  *jcache.ExactSource
	rec  *mirror
	done chan error // the manager's Start
	stop func()
}

func startMaxPending(t *testing.T, cp *controlplane.ControlPlane, dir, ns string, fail func(string) bool) *mpRun {
	t.Helper()
	mgr := newManager(t, cp.RESTConfig(), ctrl.Options{
		NewCache: jcache.NewFunc(jcache.Options{Dir: dir, NoSync: true, Logger: testr.New(t)}),
	})
	rec := newMirror(ns, func(name string) (reconcile.Result, error) {
		if fail != nil && fail(name) {
			return reconcile.Result{}, errors.New("not yet")
		}
		return reconcile.Result{}, nil
	})
	rec.c = mgr.GetClient()
	// Stops as by SIGKILL: no last commit.
	ex := jcache.ExactWith(mgr.GetCache(), "mirror", jcache.NoFinalCommit(jcache.ExactOptions{MaxPending: mpMax}))
	src := ex.Kind(&corev1.ConfigMap{}, &handler.EnqueueRequestForObject{})
	// CacheSyncTimeout well below the waits below: a WaitForSync that
	// never returns fails the manager's Start, which the waits report.
	if err := ctrl.NewControllerManagedBy(mgr).Named("mirror").
		WithOptions(controller.Options{CacheSyncTimeout: 30 * time.Second}).
		WatchesRawSource(src).Complete(ex.Reconciler(rec)); err != nil {
		t.Fatal(err)
	}
	run := runManager(t, mgr)
	return &mpRun{src: src, rec: rec, done: run.done, stop: run.stop}
}

// wait waits until cond holds, checking after each reconcile and every
// 100 ms; it fails at once when the manager's Start returns (a source
// that never synced) and after 90 s, with what it last saw.
func (r *mpRun) wait(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.After(90 * time.Second)
	state := func() string {
		_, s := atHead(r.src)
		return fmt.Sprintf("%d names reconciled; %s", len(r.rec.names()), s)
	}
	for !cond() {
		r.rec.mu.Lock()
		ch := r.rec.ch
		r.rec.mu.Unlock()
		select {
		case <-ch:
		case <-time.After(100 * time.Millisecond):
		case err := <-r.done:
			r.done <- err
			t.Fatalf("waiting for %s: the manager stopped: %v; last state %s", what, err, state())
		case <-deadline:
			t.Fatalf("timed out waiting for %s; last state %s", what, state())
		}
	}
}

func mpName(i int) string { return fmt.Sprintf("cm%04d", i) }

// createMany creates n ConfigMaps with data v=0 in ns, 16 at a time.
func createMany(t *testing.T, kube kubernetes.Interface, ns string, n int) {
	t.Helper()
	each(t, n, 16, func(i int) error {
		_, err := kube.CoreV1().ConfigMaps(ns).Create(context.Background(), &corev1.ConfigMap{
			ObjectMeta: metav1.ObjectMeta{Name: mpName(i), Namespace: ns}, Data: map[string]string{"v": "0"}}, metav1.CreateOptions{})
		return err
	})
}

func TestExact_MoreObjectsThanMaxPending(t *testing.T) {
	cp, kube, ns := setup(t)
	createMany(t, kube, ns, mpObjects)
	dir := t.TempDir()
	all := func(r *mpRun) func() bool {
		return func() bool { return len(r.rec.names()) == mpObjects }
	}

	// First start, one object failing: every object is replayed and
	// reconciled, MaxPending at a time, and no consumer is created (the
	// replay has not all reconciled).
	stuck := mpName(250)
	r := startMaxPending(t, cp, dir, ns, func(name string) bool { return name == stuck })
	r.wait(t, fmt.Sprintf("the first start to reconcile all %d objects (MaxPending %d), %s retried", mpObjects, mpMax, stuck),
		func() bool { return all(r)() && r.rec.count(stuck) > 1 })
	if c, err := r.src.Committed(); err != nil || c != 0 {
		t.Fatalf("committed %d, %v with %s of the replay failing; want 0 (no consumer)", c, err, stuck)
	}
	r.stop()

	// Restart before any commit: the replay again, every object, to the
	// head.
	r = startMaxPending(t, cp, dir, ns, nil)
	r.wait(t, "the restart before any commit to reconcile every object and commit the head", func() bool {
		ok, _ := atHead(r.src)
		return ok && all(r)()
	})
	r.stop()

	// Restart after a commit, with more changes than MaxPending made while
	// down: exactly those, to the head.
	changed := map[string]bool{}
	for i := range mpChanged {
		changed[mpName(i*5)] = true
	}
	each(t, mpChanged, 16, func(i int) error {
		_, err := kube.CoreV1().ConfigMaps(ns).Patch(context.Background(), mpName(i*5), types.MergePatchType,
			[]byte(`{"data":{"v":"1"}}`), metav1.PatchOptions{})
		return err
	})
	r = startMaxPending(t, cp, dir, ns, nil)
	r.wait(t, fmt.Sprintf("the restart after a commit to reconcile the %d changed and commit the head", mpChanged), func() bool {
		ok, _ := atHead(r.src)
		return ok && len(r.rec.names()) == mpChanged
	})
	for _, n := range r.rec.names() {
		if !changed[n] {
			t.Errorf("the restart after a commit reconciled %s, which did not change", n)
		}
	}
	r.stop()
}

// The warm standby: the leader's first start replays through the
// standby's start (no position published yet) with more objects than
// MaxPending; after it stops, more changes than MaxPending; the new
// leader takes over from the published position and reconciles them.
func TestExactStandby_MoreObjectsThanMaxPending(t *testing.T) {
	ctrllog.SetLogger(logr.Discard())
	cp, kube, ns := setupNS(t, "mpstandby")
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	createMany(t, kube, ns, mpObjects)

	a := startExactReplicaWith(t, cp, ns, "a", standbytest.NewReader(kube, ns), nil, mpMax)
	a.elected(t, 30*time.Second)
	b := startExactReplicaWith(t, cp, ns, "b", standbytest.NewReader(kube, ns), nil, mpMax)
	a.r.Wait(t, fmt.Sprintf("a reconciled all %d ConfigMaps (MaxPending %d) and published its position", mpObjects, mpMax), func() bool {
		return len(a.r.Names()) == mpObjects && exPublished(t, ctx, kube, ns) != ""
	}, func() any { return map[string]any{"a": len(a.r.Names()), "position": exPublished(t, ctx, kube, ns)} })
	a.stop()

	each(t, mpChanged, 16, func(i int) error {
		_, err := kube.CoreV1().ConfigMaps(ns).Patch(ctx, mpName(i*5), types.MergePatchType, []byte(`{"data":{"v":"1"}}`), metav1.PatchOptions{})
		return err
	})
	b.elected(t, 30*time.Second)
	b.r.Wait(t, fmt.Sprintf("b reconciled the %d changes after a stopped", mpChanged), func() bool {
		for i := range mpChanged {
			if b.r.Last(mpName(i*5)) != "1" {
				return false
			}
		}
		return true
	}, func() any {
		var missing []string
		for i := range mpChanged {
			if b.r.Last(mpName(i*5)) != "1" {
				missing = append(missing, mpName(i*5))
			}
		}
		return fmt.Sprintf("b reconciled %d; not yet with v=1: %s", len(b.r.Names()), strings.Join(missing, ","))
	})
}
