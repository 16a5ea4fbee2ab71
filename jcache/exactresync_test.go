package jcache_test

// Exact sources resync on the cache's SyncPeriod, as the cache's own
// handlers (and an informer's) do: every object is queued again as an
// update, with nothing changed, at most MaxPending at a time, and the
// committed position stays where the events put it.

import (
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-logr/logr/testr"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	crcache "sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/watchjournal/watchjournal/jcache"
)

func TestExact_ResyncsOnSyncPeriod(t *testing.T) {
	cp, kube, ns := setup(t)
	const n = 12
	createMany(t, kube, ns, n)
	mgr := newManager(t, cp.RESTConfig(), ctrl.Options{
		NewCache: jcache.NewFunc(jcache.Options{Dir: t.TempDir(), NoSync: true, Logger: testr.New(t)}),
		Cache:    crcache.Options{SyncPeriod: ptr.To(2 * time.Second)},
	})
	rec := newMirror(ns, func(string) (reconcile.Result, error) { return reconcile.Result{}, nil })
	rec.c = mgr.GetClient()
	ex := jcache.ExactWith(mgr.GetCache(), "resync", jcache.ExactOptions{MaxPending: 5})
	src := ex.Kind(&corev1.ConfigMap{}, &handler.EnqueueRequestForObject{})
	if err := ctrl.NewControllerManagedBy(mgr).Named("resync").WatchesRawSource(src).Complete(ex.Reconciler(rec)); err != nil {
		t.Fatal(err)
	}
	run := runManager(t, mgr)
	defer run.stop()
	// Every object reconciled at least three times with nothing changed:
	// the replay, then two resyncs (a resync every 2 s).
	deadline := time.After(60 * time.Second)
	for {
		rec.mu.Lock()
		low, ch := 1<<30, rec.ch
		for i := range n {
			low = min(low, rec.seen[mpName(i)])
		}
		seen := fmt.Sprint(rec.seen)
		rec.mu.Unlock()
		if low >= 3 {
			break
		}
		select {
		case <-ch:
		case <-time.After(200 * time.Millisecond):
		case err := <-run.done:
			run.done <- err
			t.Fatalf("the manager stopped: %v; reconciles %s", err, seen)
		case <-deadline:
			_, s := atHead(src)
			t.Fatalf("not every object was reconciled three times within 60 s (SyncPeriod 2 s); reconciles %s; %s", seen, s)
		}
	}
	// The resyncs did not move the committed position past the events:
	// it reaches the head, and stays there.
	deadline = time.After(30 * time.Second)
	for {
		ok, s := atHead(src)
		if ok {
			break
		}
		select {
		case <-deadline:
			t.Fatalf("the position did not reach the head: %s", s)
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// A resync does not hold the feed: a ConfigMap created while a resync of
// many more objects than MaxPending is being reconciled (slowly, 50 ms
// each) is reconciled after a few of the resync's requests, not after the
// resync has queued every object (which takes n-MaxPending reconciles).
func TestExact_ResyncLetsEventsPass(t *testing.T) {
	cp, kube, ns := setup(t)
	const n, maxPending = 100, 5
	createMany(t, kube, ns, n)
	mgr := newManager(t, cp.RESTConfig(), ctrl.Options{
		NewCache: jcache.NewFunc(jcache.Options{Dir: t.TempDir(), NoSync: true, Logger: testr.New(t)}),
		Cache:    crcache.Options{SyncPeriod: ptr.To(2 * time.Second)},
	})
	var slow atomic.Bool
	resyncedBeforeFresh := -1 // objects reconciled twice when "fresh" was first reconciled
	var rec *mirror
	rec = newMirror(ns, func(name string) (reconcile.Result, error) {
		if name == "fresh" {
			rec.mu.Lock()
			if resyncedBeforeFresh < 0 {
				resyncedBeforeFresh = 0
				for i := range n {
					if rec.seen[mpName(i)] >= 2 {
						resyncedBeforeFresh++
					}
				}
			}
			rec.mu.Unlock()
		}
		if slow.Load() {
			time.Sleep(50 * time.Millisecond)
		}
		return reconcile.Result{}, nil
	})
	rec.c = mgr.GetClient()
	ex := jcache.ExactWith(mgr.GetCache(), "resync", jcache.ExactOptions{MaxPending: maxPending})
	src := ex.Kind(&corev1.ConfigMap{}, &handler.EnqueueRequestForObject{})
	if err := ctrl.NewControllerManagedBy(mgr).Named("resync").WatchesRawSource(src).Complete(ex.Reconciler(rec)); err != nil {
		t.Fatal(err)
	}
	run := runManager(t, mgr)
	defer run.stop()
	reconciled := func(times int) int {
		rec.mu.Lock()
		defer rec.mu.Unlock()
		k := 0
		for i := range n {
			if rec.seen[mpName(i)] >= times {
				k++
			}
		}
		return k
	}
	state := func() any {
		rec.mu.Lock()
		defer rec.mu.Unlock()
		return fmt.Sprintf("fresh after %d resynced; reconciles %v", resyncedBeforeFresh, rec.seen)
	}
	rec.waitUntil(t, "the replay reconciled", func() bool { return reconciled(1) == n }, state)
	slow.Store(true)
	rec.waitUntil(t, "a resync under way", func() bool { return reconciled(2) > 0 }, state)
	createCM(t, kube, ns, "fresh", nil, nil)
	rec.waitUntil(t, "fresh reconciled", func() bool { return rec.count("fresh") > 0 }, state)
	rec.mu.Lock()
	got := resyncedBeforeFresh
	rec.mu.Unlock()
	t.Logf("fresh was reconciled after %d of the resync's %d objects", got, n)
	if got >= n-maxPending {
		t.Fatalf("fresh was reconciled after %d of the resync's %d objects; want it to pass the resync (before %d)", got, n, n-maxPending)
	}
}
