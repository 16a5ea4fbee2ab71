package jcache_test

// Exact sources resync on the cache's SyncPeriod, as the cache's own
// handlers (and an informer's) do: every object is queued again as an
// update, with nothing changed, at most MaxPending at a time, and the
// committed position stays where the events put it.

import (
	"fmt"
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
