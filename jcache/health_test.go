package jcache_test

import (
	"context"
	"errors"
	"strconv"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/types"
	crcache "sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/watchjournal/watchjournal/jcache"
	"github.com/watchjournal/watchjournal/journal"
	wjreconcile "github.com/watchjournal/watchjournal/reconcile"
)

// Ensure read-your-writes through jcache.WaitFor (a Patch, then the wait,
// then a Get through the cache sees the patch; a resourceVersion never
// written times out with journal.ErrNotApplied), and the cache's readyz and
// healthz checkers: ready and alive while synced, not ready and still alive
// with the apiserver down past the bound, ready again once it is back.
func TestCache_WaitForAndHealth(t *testing.T) {
	cp, kube, ns := setup(t)
	createCM(t, kube, ns, "a", nil, map[string]string{"step": "created"})
	r := startCache(t, jcache.NewFunc(jcache.Options{Dir: t.TempDir(), NoSync: true}), crcache.Options{}, cp)
	defer r.stop()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var cm corev1.ConfigMap
	if err := r.c.Get(ctx, client.ObjectKey{Namespace: ns, Name: "a"}, &cm); err != nil {
		t.Fatal(err)
	}

	patched, err := kube.CoreV1().ConfigMaps(ns).Patch(ctx, "a", types.MergePatchType, []byte(`{"data":{"step":"patched"}}`), metav1.PatchOptions{})
	if err != nil {
		t.Fatal(err)
	}
	wctx, wcancel := context.WithTimeout(ctx, 30*time.Second)
	defer wcancel()
	if err := jcache.WaitFor(wctx, r.c, patched); err != nil {
		t.Fatalf("WaitFor after a Patch: %v", err)
	}
	if err := r.c.Get(ctx, client.ObjectKey{Namespace: ns, Name: "a"}, &cm); err != nil {
		t.Fatal(err)
	}
	if cm.Data["step"] != "patched" || cm.ResourceVersion != patched.ResourceVersion {
		t.Errorf("Get after WaitFor: data %v at %s; want step=patched at %s", cm.Data, cm.ResourceVersion, patched.ResourceVersion)
	}
	rv, err := strconv.ParseUint(patched.ResourceVersion, 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	future := patched.DeepCopy()
	future.ResourceVersion = strconv.FormatUint(rv+1_000_000, 10)
	fctx, fcancel := context.WithTimeout(ctx, time.Second)
	defer fcancel()
	if err := jcache.WaitFor(fctx, r.c, future); !errors.Is(err, journal.ErrNotApplied) || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("WaitFor of a resourceVersion never written = %v; want ErrNotApplied and DeadlineExceeded", err)
	}

	readyz := jcache.ReadyzCheck(r.c, time.Second, &corev1.ConfigMap{})
	healthz := jcache.HealthzCheck(r.c, &corev1.ConfigMap{})
	if err := readyz(nil); err != nil {
		t.Errorf("readyz synced = %v; want nil", err)
	}
	if err := healthz(nil); err != nil {
		t.Errorf("healthz synced = %v; want nil", err)
	}
	if err := cp.StopAPIServer(); err != nil {
		t.Fatal(err)
	}
	waitErr := func(what string, cond func() bool) {
		t.Helper()
		deadline := time.Now().Add(time.Minute)
		for !cond() {
			if time.Now().After(deadline) {
				t.Fatalf("timed out waiting for %s", what)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	waitErr("readyz failing", func() bool { return errors.Is(readyz(nil), wjreconcile.ErrNotReady) })
	if err := healthz(nil); err != nil {
		t.Errorf("healthz with the apiserver down (backoff) = %v; want nil", err)
	}
	if err := cp.StartAPIServer(ctx); err != nil {
		t.Fatal(err)
	}
	waitErr("readyz ready again", func() bool { return readyz(nil) == nil })
}

// Ensure a journal whose loop stopped on a fatal error (the apiserver
// rejects the request: a field selector ConfigMaps do not support, 400)
// fails both the healthz and the readyz checker with that error, where
// an apiserver outage (above) fails readyz alone.
func TestCache_HealthzFailsOnFatalError(t *testing.T) {
	cp, _, _ := setup(t)
	c, err := jcache.NewFunc(jcache.Options{Dir: t.TempDir(), NoSync: true,
		Loop: wjreconcile.Options{MinBackoff: 20 * time.Millisecond, MaxBackoff: 200 * time.Millisecond}})(cp.RESTConfig(), crcache.Options{
		ByObject: map[client.Object]crcache.ByObject{&corev1.ConfigMap{}: {Field: fields.OneTermEqualSelector("spec.nodeName", "x")}},
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	done := make(chan error, 1)
	go func() { done <- c.Start(ctx) }()
	defer func() {
		cancel()
		t.Logf("cache Start = %v", <-done) // the informer's fatal error may end it
	}()
	healthz := jcache.HealthzCheck(c, &corev1.ConfigMap{})
	readyz := jcache.ReadyzCheck(c, time.Second, &corev1.ConfigMap{})
	var lastH, lastR error
	for {
		lastH, lastR = healthz(nil), readyz(nil)
		if errors.Is(lastH, wjreconcile.ErrRejected) && errors.Is(lastR, wjreconcile.ErrRejected) {
			break
		}
		select {
		case <-ctx.Done():
			t.Fatalf("healthz = %v, readyz = %v; want both to match reconcile.ErrRejected once the apiserver rejected the field selector", lastH, lastR)
		case <-time.After(50 * time.Millisecond):
		}
	}
	t.Logf("healthz: %v", lastH)
}
