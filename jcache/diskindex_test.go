package jcache_test

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/kubernetes"
	toolscache "k8s.io/client-go/tools/cache"
	crcache "sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/watchjournal/watchjournal/internal/testing/controlplane"
	"github.com/watchjournal/watchjournal/jcache"
)

// startIndexed builds a cache, registers the data.k index as a manager
// does (before the cache starts), then starts it and waits for its sync
// and for the index's reindex. calls counts the index function's
// calls.
func startIndexed(t *testing.T, newCache crcache.NewCacheFunc, opts crcache.Options, cp *controlplane.ControlPlane, calls *atomic.Int64) *running {
	t.Helper()
	return startIndexedAt(t, newCache, cp.RESTConfig(), opts, calls)
}

// createIndexed creates the ConfigMaps the index tests start from: a and
// c with data k=1, b with k=b.
func createIndexed(t *testing.T, kube kubernetes.Interface, ns string) {
	t.Helper()
	createCM(t, kube, ns, "a", nil, map[string]string{"k": "1"})
	createCM(t, kube, ns, "b", nil, map[string]string{"k": "b"})
	createCM(t, kube, ns, "c", nil, map[string]string{"k": "1"})
}

// changeIndexedAndCompact makes the changes the index tests' relist must
// find (a's k set to 3, b deleted, d created with k=1), then compacts
// etcd past them.
func changeIndexedAndCompact(t *testing.T, ctx context.Context, cp *controlplane.ControlPlane, kube kubernetes.Interface, ns string) {
	t.Helper()
	updateCM(t, ctx, kube, ns, "a", func(a *corev1.ConfigMap) {
		a.Data["k"] = "3"
	})
	deleteCM(t, ctx, kube, ns, "b")
	createCM(t, kube, ns, "d", nil, map[string]string{"k": "1"})
	if _, err := cp.Compact(ctx); err != nil {
		t.Fatal(err)
	}
}

// wantByIndex lists ns through the data.k index and checks the names, and
// that the read was served by the index on disk, not evaluated over the
// objects.
func wantByIndex(t *testing.T, c client.Reader, ns, value string, want ...string) {
	t.Helper()
	disk, scan := jcache.IndexReads()
	var l corev1.ConfigMapList
	if err := c.List(context.Background(), &l, client.InNamespace(ns), client.MatchingFields{"data.k": value}); err != nil {
		t.Fatal(err)
	}
	got := []string{}
	for _, cm := range l.Items {
		if cm.Data["k"] != value {
			t.Errorf("index data.k=%s gave %s with data %v", value, cm.Name, cm.Data)
		}
		got = append(got, cm.Name)
	}
	sort.Strings(got)
	if want == nil {
		want = []string{}
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("index data.k=%s: %v, want %v", value, got, want)
	}
	disk2, scan2 := jcache.IndexReads()
	if disk2 != disk+1 || scan2 != scan {
		t.Errorf("index data.k=%s: reads on disk %d→%d, at read time %d→%d; want one on disk, none at read time", value, disk, disk2, scan, scan2)
	}
}

// TestCache_IndexOnDisk_LiveRelistRestart: an IndexField index is kept in
// the journal file: a lookup is served by it after the first list, after a
// live update, and after a restart whose resume gets 410 Gone (etcd
// compacted), so a relist with an update, an add and an inferred delete;
// the restart does not build the index again (the function runs for the
// relist's changed objects and once per object for the reindex,
// which rewrites nothing).
func TestCache_IndexOnDisk_LiveRelistRestart(t *testing.T) {
	cp, kube, ns := setup(t)
	newCache := jcache.NewFunc(jcache.Options{Dir: t.TempDir(), NoSync: true})
	opts := crcache.Options{Mapper: staticMapper()}
	createIndexed(t, kube, ns)

	var calls atomic.Int64
	r1 := startIndexed(t, newCache, opts, cp, &calls)
	wantByIndex(t, r1.c, ns, "1", "a", "c")
	wantByIndex(t, r1.c, ns, "b", "b")

	// A live update: the index changes with the object.
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	rec := newRecorder()
	addHandler(t, ctx, r1.c, &corev1.ConfigMap{}, rec)
	updateCM(t, ctx, kube, ns, "c", func(c *corev1.ConfigMap) {
		c.Data["k"] = "2"
	})
	rec.waitFor(t, "the live update", hasAll("update c labels=map[] data=map[k:1] -> c labels=map[] data=map[k:2]"))
	wantByIndex(t, r1.c, ns, "1", "a")
	wantByIndex(t, r1.c, ns, "2", "c")
	r1.stop()

	// Changed while no cache runs, then etcd compacted: the next process's
	// resume answers 410 and it relists.
	changeIndexedAndCompact(t, ctx, cp, kube, ns)

	calls.Store(0)
	r2 := startIndexed(t, newCache, opts, cp, &calls)
	defer r2.stop()
	// The relist wrote a's MODIFIED and d's ADDED (b's tombstone carries no
	// object): two calls, beside the reindex's one per object, which
	// finds the index current.
	if n, st := calls.Load(), r2.reindexed; n != int64(2+st.Keys) || st.Rewritten != 0 {
		t.Errorf("index function called %d times by the restart, reindex %+v; want 2 (a and d) + one per key, nothing rewritten", n, st)
	}
	wantByIndex(t, r2.c, ns, "1", "d")
	wantByIndex(t, r2.c, ns, "2", "c")
	wantByIndex(t, r2.c, ns, "3", "a")
	wantByIndex(t, r2.c, ns, "b")

	// The index's values, read from the file.
	inf2 := getInformer(t, ctx, r2.c, &corev1.ConfigMap{})
	calls.Store(0)
	vals := inf2.(toolscache.SharedIndexInformer).GetIndexer().ListIndexFuncValues("field:data.k")
	sort.Strings(vals)
	want := []string{"__all_namespaces/1", "__all_namespaces/2", "__all_namespaces/3", ns + "/1", ns + "/2", ns + "/3"}
	// The cache is cluster-wide: other namespaces' ConfigMaps (without
	// data.k) add their empty values; each value appears once.
	if !slices.IsSorted(vals) || len(slices.Compact(slices.Clone(vals))) != len(vals) || calls.Load() != 0 {
		t.Errorf("ListIndexFuncValues = %q with %d calls of the function; want each value once, from the file", vals, calls.Load())
	}
	for _, w := range want {
		if !slices.Contains(vals, w) {
			t.Errorf("ListIndexFuncValues = %q; want %q among them", vals, w)
		}
	}
}
