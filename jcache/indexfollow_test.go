package jcache_test

// IndexField indexes on disk follow the code: a manager's next version
// that changes an index function (or the transform its objects pass
// through) under the same name answers with the new function, an
// unchanged one is not rewritten, and an index added to a large file is
// built in bounded transactions while reads stay correct.

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	toolscache "k8s.io/client-go/tools/cache"
	ctrl "sigs.k8s.io/controller-runtime"
	crcache "sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/watchjournal/watchjournal/internal/testing/controlplane"
	"github.com/watchjournal/watchjournal/jcache"
	"github.com/watchjournal/watchjournal/journal"
)

// byV is the index "by-v": a ConfigMap's data["v"], with a suffix.
func byV(suffix string) client.IndexerFunc {
	return func(o client.Object) []string {
		if v := o.(*corev1.ConfigMap).Data["v"]; v != "" {
			return []string{v + suffix}
		}
		return nil
	}
}

// mgrRun is a manager on a jcache directory, its cache limited to one
// namespace.
type mgrRun struct {
	c    client.Client
	stop func()
}

// startIndexedManager starts a manager whose cache is jcache's on dir, with the
// ConfigMap index "by-v" fn (none when nil) and the cache's
// DefaultTransform tr, and waits for the cache's sync.
func startIndexedManager(t *testing.T, cp *controlplane.ControlPlane, dir, ns string, fn client.IndexerFunc, tr toolscache.TransformFunc) *mgrRun {
	t.Helper()
	mgr := newManager(t, cp.RESTConfig(), ctrl.Options{
		NewCache: jcache.NewFunc(jcache.Options{Dir: dir, NoSync: true}),
		Cache:    crcache.Options{DefaultNamespaces: map[string]crcache.Config{ns: {}}, DefaultTransform: tr},
	})
	var err error
	if fn != nil {
		err = mgr.GetFieldIndexer().IndexField(context.Background(), &corev1.ConfigMap{}, "by-v", fn)
	} else {
		_, err = mgr.GetCache().GetInformer(context.Background(), &corev1.ConfigMap{})
	}
	if err != nil {
		t.Fatal(err)
	}
	stop := runManager(t, mgr).stop
	waitSynced(t, mgr.GetCache(), 60*time.Second)
	return &mgrRun{c: mgr.GetClient(), stop: stop}
}

// runOne starts run 1 of the index tests across a restart on dir, with
// by-v as data["v"], and creates n ConfigMaps with v "one", waiting until
// by-v lists them; it returns the run and their names.
func runOne(t *testing.T, cp *controlplane.ControlPlane, kube kubernetes.Interface, dir, ns string, n int) (*mgrRun, []string) {
	t.Helper()
	r1 := startIndexedManager(t, cp, dir, ns, byV(""), nil)
	names := createCMs(t, kube, ns, n, cmName, func(int) string { return "one" })
	waitByV(t, r1.c, ns, "one", names)
	return r1, names
}

// listByV returns the sorted names of the ConfigMaps of ns whose by-v
// index holds value, read through the manager's client (its cache).
func listByV(t *testing.T, c client.Reader, ns, value string) []string {
	t.Helper()
	var l corev1.ConfigMapList
	if err := c.List(context.Background(), &l, client.InNamespace(ns), client.MatchingFields{"by-v": value}); err != nil {
		t.Fatal(err)
	}
	out := []string{}
	for _, cm := range l.Items {
		out = append(out, cm.Name)
	}
	sort.Strings(out)
	return out
}

// waitByV waits until by-v value lists want (sorted), and prints the last
// list seen on timeout.
func waitByV(t *testing.T, c client.Reader, ns, value string, want []string) {
	t.Helper()
	var got []string
	err := wait.PollUntilContextTimeout(context.Background(), 20*time.Millisecond, 60*time.Second, true, func(context.Context) (bool, error) {
		got = listByV(t, c, ns, value)
		return slices.Equal(got, want), nil
	})
	if err != nil {
		t.Fatalf("by-v=%s lists %d ConfigMaps %q; want %d %q", value, len(got), got, len(want), want)
	}
}

// reindexed waits for the reindex runs of the open files in dir
// (every open file, for "") and returns their sum.
func reindexed(t *testing.T, dir string) journal.ReindexStats {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	all, err := jcache.Reindexes(ctx, dir)
	if err != nil {
		t.Fatalf("reindex runs of %s: %v", dir, err)
	}
	var sum journal.ReindexStats
	for _, s := range all {
		sum.Keys += s.Keys
		sum.Rewritten += s.Rewritten
		sum.Transactions += s.Transactions
		sum.MaxRewrite = max(sum.MaxRewrite, s.MaxRewrite)
	}
	return sum
}

// wantFromDisk lists by-v value and checks the names and that the index
// on disk served the read.
func wantFromDisk(t *testing.T, c client.Reader, ns, value string, want []string) {
	t.Helper()
	disk, scan := jcache.IndexReads()
	if got := listByV(t, c, ns, value); !slices.Equal(got, want) {
		t.Errorf("by-v=%s lists %d ConfigMaps %q; want %d %q", value, len(got), got, len(want), want)
	}
	if disk2, scan2 := jcache.IndexReads(); disk2 != disk+1 || scan2 != scan {
		t.Errorf("by-v=%s: reads on disk %d→%d, at read time %d→%d; want one on disk", value, disk, disk2, scan, scan2)
	}
}

// createCMs creates n ConfigMaps name(i) with data v = value(i), 16 at a
// time, and returns their names, sorted.
func createCMs(t *testing.T, kube kubernetes.Interface, ns string, n int, name func(int) string, value func(int) string) []string {
	t.Helper()
	each(t, n, 16, func(i int) error {
		_, err := kube.CoreV1().ConfigMaps(ns).Create(context.Background(), &corev1.ConfigMap{
			ObjectMeta: metav1.ObjectMeta{Name: name(i), Namespace: ns}, Data: map[string]string{"v": value(i)}}, metav1.CreateOptions{})
		return err
	})
	out := make([]string, n)
	for i := range n {
		out[i] = name(i)
	}
	sort.Strings(out)
	return out
}

func cmName(i int) string { return fmt.Sprintf("cm-%04d", i) }

// TestCache_IndexFollowsChangedFunctionAcrossRestart: run 1 of a manager
// indexes by-v as data["v"]; run 2, on the same directory, registers
// by-v as data["v"]+"-2". Without any change to the objects, a List after
// run 2's cache synced finds every object under the new value and none
// under the old, before the reindex is done (read at read time) and
// after (from disk, every key rewritten once).
func TestCache_IndexFollowsChangedFunctionAcrossRestart(t *testing.T) {
	cp, kube, ns := setup(t)
	dir := t.TempDir()
	r1, names := runOne(t, cp, kube, dir, ns, 20)
	reindexed(t, dir)
	r1.stop()

	r2 := startIndexedManager(t, cp, dir, ns, byV("-2"), nil)
	defer r2.stop()
	if got := listByV(t, r2.c, ns, "one-2"); !slices.Equal(got, names) {
		t.Errorf("run 2, by-v=one-2 lists %q; want all %d: %q", got, len(names), names)
	}
	if got := listByV(t, r2.c, ns, "one"); len(got) != 0 {
		t.Errorf("run 2, by-v=one (run 1's function) lists %q; want none", got)
	}
	st := reindexed(t, dir)
	if st.Keys != len(names) || st.Rewritten != len(names) || st.Transactions != 1 {
		t.Errorf("run 2's reindex: %+v; want %d keys read and rewritten, in 1 transaction", st, len(names))
	}
	wantFromDisk(t, r2.c, ns, "one-2", names)
	wantFromDisk(t, r2.c, ns, "one", []string{})
}

// TestCache_IndexUnchangedAcrossRestartIsNotRewritten: run 2 registers
// the same function: its reindex reads every key and rewrites none
// (no write transaction), and the index answers from disk.
func TestCache_IndexUnchangedAcrossRestartIsNotRewritten(t *testing.T) {
	cp, kube, ns := setup(t)
	dir := t.TempDir()
	r1, names := runOne(t, cp, kube, dir, ns, 20)
	if st := reindexed(t, dir); st.Keys != 0 {
		t.Errorf("run 1's reindex, on an empty file: %+v; want no key", st)
	}
	r1.stop()

	r2 := startIndexedManager(t, cp, dir, ns, byV(""), nil)
	defer r2.stop()
	if st := reindexed(t, dir); st.Keys != len(names) || st.Rewritten != 0 || st.Transactions != 0 {
		t.Errorf("run 2's reindex of the same function: %+v; want %d keys read, none rewritten, no write transaction", st, len(names))
	}
	wantFromDisk(t, r2.c, ns, "one", names)
}

// TestCache_IndexFollowsChangedTransform: run 2 has a DefaultTransform
// that changes what the same index function sees; the index follows it.
// The transform runs before the disk, so run 2 starts the file afresh
// (transform.go): its index is written with the objects, and the reindex
// has nothing to rewrite.
func TestCache_IndexFollowsChangedTransform(t *testing.T) {
	cp, kube, ns := setup(t)
	dir := t.TempDir()
	r1, names := runOne(t, cp, kube, dir, ns, 5)
	r1.stop()

	prefix := func(o any) (any, error) {
		if cm, ok := o.(*corev1.ConfigMap); ok && cm.Data["v"] != "" {
			cm.Data["v"] = "t-" + cm.Data["v"]
		}
		return o, nil
	}
	r2 := startIndexedManager(t, cp, dir, ns, byV(""), prefix)
	defer r2.stop()
	if got := listByV(t, r2.c, ns, "t-one"); !slices.Equal(got, names) {
		t.Errorf("run 2 (transformed), by-v=t-one lists %q; want all %d", got, len(names))
	}
	if got := listByV(t, r2.c, ns, "one"); len(got) != 0 {
		t.Errorf("run 2 (transformed), by-v=one (untransformed) lists %q; want none", got)
	}
	if st := reindexed(t, dir); st.Rewritten != 0 {
		t.Errorf("run 2's reindex: %+v; want nothing rewritten (the file started afresh)", st)
	}
	wantFromDisk(t, r2.c, ns, "t-one", names)
}

// TestCache_IndexAddedToManyObjectsIsBuiltInBatches: run 1 keeps 3,000
// ConfigMaps without an index; run 2 adds by-v. Its build takes one write
// transaction per batch of journal.ReindexBatch keys, never one for all;
// while it is paused (its function blocked on one object, in no
// transaction), a List through the index is correct (read at read time)
// and the writer keeps writing: updates of a key already built and of one
// not yet read are in the cache and, after the build, in the index.
func TestCache_IndexAddedToManyObjectsIsBuiltInBatches(t *testing.T) {
	cp, kube, ns := setup(t)
	dir := t.TempDir()
	const n = 3000
	value := func(i int) string { return fmt.Sprint("v", i%10) }
	r1 := startIndexedManager(t, cp, dir, ns, nil, nil)
	createCMs(t, kube, ns, n, cmName, value)
	var all []string
	err := wait.PollUntilContextTimeout(context.Background(), 50*time.Millisecond, 120*time.Second, true, func(ctx context.Context) (bool, error) {
		var l corev1.ConfigMapList
		if err := r1.c.List(ctx, &l, client.InNamespace(ns)); err != nil {
			return false, err
		}
		all = all[:0]
		for _, cm := range l.Items {
			all = append(all, cm.Name)
		}
		return len(all) == n, nil
	})
	if err != nil {
		t.Fatalf("run 1's cache holds %d ConfigMaps; want %d: %v", len(all), n, err)
	}
	r1.stop()

	// The first call on cm-1500 (the build's: no read has run yet)
	// blocks until resume.
	paused, resume := make(chan struct{}), make(chan struct{})
	var gated atomic.Bool
	fn := func(o client.Object) []string {
		if o.GetName() == cmName(1500) && gated.CompareAndSwap(false, true) {
			close(paused)
			<-resume
		}
		return byV("")(o)
	}
	r2 := startIndexedManager(t, cp, dir, ns, fn, nil)
	defer r2.stop()
	released := false
	defer func() {
		if !released {
			close(resume)
		}
	}()
	select {
	case <-paused:
	case <-time.After(60 * time.Second):
		t.Fatal("the build never called the index function on cm-1500")
	}
	want3 := []string{}
	for i := range n {
		if value(i) == "v3" {
			want3 = append(want3, cmName(i))
		}
	}
	_, scan := jcache.IndexReads()
	if got := listByV(t, r2.c, ns, "v3"); !slices.Equal(got, want3) {
		t.Errorf("during the build, by-v=v3 lists %d ConfigMaps; want %d", len(got), len(want3))
	}
	if _, scan2 := jcache.IndexReads(); scan2 != scan+1 {
		t.Errorf("during the build, reads at read time %d→%d; want one (the index does not answer until built)", scan, scan2)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	for _, name := range []string{cmName(1), cmName(n - 1)} {
		cm, err := kube.CoreV1().ConfigMaps(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		cm.Data["v"] = "new"
		if _, err := kube.CoreV1().ConfigMaps(ns).Update(ctx, cm, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	wantNew := []string{cmName(1), cmName(n - 1)}
	waitByV(t, r2.c, ns, "new", wantNew)
	released = true
	close(resume)

	st := reindexed(t, dir)
	batches := (n + journal.ReindexBatch - 1) / journal.ReindexBatch
	if st.Keys != n || st.Transactions != batches || st.MaxRewrite > journal.ReindexBatch || st.Rewritten < n-2 || st.Rewritten > n {
		t.Errorf("the build: %+v; want %d keys, %d to %d rewritten in %d transactions of at most %d", st, n, n-2, n, batches, journal.ReindexBatch)
	}
	wantFromDisk(t, r2.c, ns, "new", wantNew)
	wantFromDisk(t, r2.c, ns, "v3", want3)
}
