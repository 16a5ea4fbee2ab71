package jcache_test

// The point of the package: a synced cache's heap does not grow with the
// objects it holds, where controller-runtime's does.

import (
	"context"
	"fmt"
	"runtime"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	crcache "sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/watchjournal/watchjournal/jcache"
)

// heapAfterGC is the live heap, in bytes, after two collections.
func heapAfterGC() uint64 {
	runtime.GC()
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}

// TestCache_HeapFlatInObjects: 2,000 ConfigMaps of 1 KiB, synced into
// jcache's cache and into controller-runtime's, one after the other in
// this process: jcache's cache, held and synced, adds at most a quarter of
// what controller-runtime's adds to the live heap.
func TestCache_HeapFlatInObjects(t *testing.T) {
	cp, kube, ns := setup(t)
	const n = 2000
	value := strings.Repeat("x", 1024)
	createCMs(t, kube, ns, n, func(i int) string { return fmt.Sprintf("cm-%05d", i) }, func(int) string { return value })
	grow := func(name string, newCache crcache.NewCacheFunc) uint64 {
		before := heapAfterGC()
		r := startCache(t, newCache, crcache.Options{}, cp)
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		var l corev1.ConfigMapList
		if err := r.c.List(ctx, &l, client.InNamespace(ns), client.Limit(1)); err != nil {
			t.Fatal(err)
		}
		after := heapAfterGC()
		runtime.KeepAlive(r.c)
		r.stop()
		var d uint64
		if after > before {
			d = after - before
		}
		t.Logf("%s: live heap grew by %d KiB with %d ConfigMaps of 1 KiB synced", name, d>>10, n)
		return d
	}
	// jcache first: what either pays once in the process counts against it.
	jc := grow("jcache", jcache.NewFunc(jcache.Options{Dir: t.TempDir(), NoSync: true}))
	cr := grow("controller-runtime cache.New", crcache.New)
	if jc*4 > cr {
		t.Errorf("jcache's heap grew by %d KiB, more than a quarter of controller-runtime's %d KiB", jc>>10, cr>>10)
	}
}
