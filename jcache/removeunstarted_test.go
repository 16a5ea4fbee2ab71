package jcache_test

import (
	"bytes"
	"context"
	"path/filepath"
	"runtime"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	crcache "sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/watchjournal/watchjournal/jcache"
	"github.com/watchjournal/watchjournal/journal"
)

// ownGoroutines returns the stacks of the goroutines running code of
// jcache, reconcile or journal, other than the test's own.
func ownGoroutines() []string {
	buf := make([]byte, 1<<20)
	for {
		n := runtime.Stack(buf, true)
		if n < len(buf) {
			buf = buf[:n]
			break
		}
		buf = make([]byte, 2*len(buf))
	}
	var out []string
	for _, g := range bytes.Split(buf, []byte("\n\n")) {
		if bytes.Contains(g, []byte("jcache_test.")) {
			continue
		}
		for _, pkg := range []string{"watchjournal/jcache.", "watchjournal/reconcile.", "watchjournal/journal."} {
			if bytes.Contains(g, []byte(pkg)) {
				out = append(out, string(g))
				break
			}
		}
	}
	return out
}

// waitNoOwnGoroutines waits until no goroutine runs the library's code.
func waitNoOwnGoroutines(t *testing.T, when string) {
	t.Helper()
	var left []string
	if err := wait.PollUntilContextTimeout(context.Background(), 10*time.Millisecond, 30*time.Second, true, func(context.Context) (bool, error) {
		left = ownGoroutines()
		return len(left) == 0, nil
	}); err != nil {
		t.Fatalf("%s: goroutines left: %q", when, left)
	}
}

// TestCache_RemoveInformerBeforeStart: an informer built before the
// cache starts and removed before it starts releases its file (unlocked:
// a journal.Open and a second cache on the directory take it at once)
// and leaves no goroutine; starting and stopping the cache does not run
// it again.
func TestCache_RemoveInformerBeforeStart(t *testing.T) {
	cp, kube, ns := setup(t)
	createCM(t, kube, ns, "a", nil, nil)
	dir := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	c, err := jcache.NewFunc(jcache.Options{Dir: dir, NoSync: true})(cp.RESTConfig(), crcache.Options{})
	if err != nil {
		t.Fatal(err)
	}
	getInformer(t, ctx, c, &corev1.ConfigMap{}, crcache.BlockUntilSynced(false))
	files, _ := filepath.Glob(filepath.Join(dir, "configmaps.v1.*.db"))
	if len(files) != 1 {
		t.Fatalf("files %v, want one configmaps file", files)
	}
	if err := c.RemoveInformer(ctx, &corev1.ConfigMap{}); err != nil {
		t.Fatal(err)
	}
	unlocked := func(when string) {
		t.Helper()
		j, err := journal.Open(files[0], &journal.Options{Timeout: -1})
		if err != nil {
			t.Fatalf("%s: Open = %v; want the file unlocked", when, err)
		}
		_ = j.Close()
	}
	unlocked("after RemoveInformer before the start")
	waitNoOwnGoroutines(t, "after RemoveInformer before the start")

	// A second cache on the directory reads the same file.
	r := startCache(t, jcache.NewFunc(jcache.Options{Dir: dir, NoSync: true}), crcache.Options{}, cp)
	var got corev1.ConfigMap
	if err := r.c.Get(ctx, client.ObjectKey{Namespace: ns, Name: "a"}, &got); err != nil {
		t.Fatalf("the second cache's Get: %v", err)
	}
	r.stop()
	unlocked("after the second cache stopped")
	waitNoOwnGoroutines(t, "after the second cache stopped")

	// The first cache, started and stopped, leaves the file alone.
	sctx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- c.Start(sctx) }()
	if !c.WaitForCacheSync(sctx) {
		t.Fatal("the first cache did not start")
	}
	unlocked("while the first cache runs")
	stop()
	if err := <-done; err != nil {
		t.Fatalf("Start = %v", err)
	}
	unlocked("after the first cache stopped")
	waitNoOwnGoroutines(t, "after the first cache stopped")
}
