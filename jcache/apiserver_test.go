package jcache_test

// Tests against the real kube-apiserver of what the conformance suite
// (make conformance) does not pin: handler replay from disk before the
// server answers, OnUpdate's old object complete (also across a restart),
// a handler added after sync, an index lookup, RemoveInformer releasing
// its file, Secrets refused without the opt-in.

import (
	"context"
	"encoding/base64"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	toolscache "k8s.io/client-go/tools/cache"
	crcache "sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/watchjournal/watchjournal/internal/testing/controlplane"
	"github.com/watchjournal/watchjournal/jcache"
	"github.com/watchjournal/watchjournal/journal"
)

// recorder is a handler that records what it is given, as strings.
type recorder struct {
	mu      sync.Mutex
	events  []string
	changed chan struct{}
}

func newRecorder() *recorder { return &recorder{changed: make(chan struct{})} }

func (r *recorder) add(s string) {
	r.mu.Lock()
	r.events = append(r.events, s)
	close(r.changed)
	r.changed = make(chan struct{})
	r.mu.Unlock()
}

func cmString(o any) string {
	if d, ok := o.(toolscache.DeletedFinalStateUnknown); ok {
		return "unknown(" + cmString(d.Obj) + ")"
	}
	cm := o.(*corev1.ConfigMap)
	return fmt.Sprintf("%s labels=%v data=%v", cm.Name, cm.Labels, cm.Data)
}

func (r *recorder) OnAdd(o any, initial bool) { r.add(fmt.Sprintf("add %s", cmString(o))) }
func (r *recorder) OnUpdate(old, o any) {
	r.add(fmt.Sprintf("update %s -> %s", cmString(old), cmString(o)))
}
func (r *recorder) OnDelete(o any) { r.add(fmt.Sprintf("delete %s", cmString(o))) }

// waitFor waits until cond holds for the recorded events.
func (r *recorder) waitFor(t *testing.T, what string, cond func([]string) bool) []string {
	t.Helper()
	deadline := time.After(30 * time.Second)
	for {
		r.mu.Lock()
		evs, ch := append([]string(nil), r.events...), r.changed
		r.mu.Unlock()
		if cond(evs) {
			return evs
		}
		select {
		case <-ch:
		case <-deadline:
			t.Fatalf("timed out waiting for %s; events: %q", what, evs)
		}
	}
}

func hasAll(want ...string) func([]string) bool {
	return func(evs []string) bool {
		seen := map[string]bool{}
		for _, e := range evs {
			seen[e] = true
		}
		for _, w := range want {
			if !seen[w] {
				return false
			}
		}
		return true
	}
}

// running is a started cache.
type running struct {
	c    crcache.Cache
	stop func()
	// reindexed is what the reindex runs of the cache's start did
	// (startIndexed).
	reindexed journal.ReindexStats
}

// startWhileDown stops cp's apiserver, then starts a cache on cp as
// startCache does: it syncs from its files alone.
func startWhileDown(t *testing.T, newCache crcache.NewCacheFunc, opts crcache.Options, cp *controlplane.ControlPlane) *running {
	t.Helper()
	if err := cp.StopAPIServer(); err != nil {
		t.Fatal(err)
	}
	return startCache(t, newCache, opts, cp)
}

// startCache starts a cache on cp and waits for its sync.
func startCache(t *testing.T, newCache crcache.NewCacheFunc, cfgOpts crcache.Options, cp *controlplane.ControlPlane) *running {
	t.Helper()
	return startWith(t, newCache, cp.RESTConfig(), cfgOpts, nil)
}

// indexData registers on c an index of ConfigMaps named "data."+key, by
// the value of their data key, and waits for the reindex runs it starts.
func indexData(t *testing.T, ctx context.Context, c client.FieldIndexer, key string) {
	t.Helper()
	if err := c.IndexField(ctx, &corev1.ConfigMap{}, "data."+key, func(o client.Object) []string {
		return []string{o.(*corev1.ConfigMap).Data[key]}
	}); err != nil {
		t.Fatal(err)
	}
	reindexed(t, "")
}

// createCM creates the ConfigMap ns/name with labels and data.
func createCM(t *testing.T, kube kubernetes.Interface, ns, name string, labels, data map[string]string) *corev1.ConfigMap {
	t.Helper()
	cm, err := kube.CoreV1().ConfigMaps(ns).Create(context.Background(), &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Labels: labels}, Data: data}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return cm
}

// setup starts a control plane with the namespace "jc".
func setup(t *testing.T) (*controlplane.ControlPlane, kubernetes.Interface, string) {
	return setupNS(t, "jc")
}

// setupNS starts a control plane with the namespace ns.
func setupNS(t *testing.T, ns string) (*controlplane.ControlPlane, kubernetes.Interface, string) {
	t.Helper()
	cp := controlplane.StartT(t, controlplane.Options{})
	kube := kubernetes.NewForConfigOrDie(cp.RESTConfig())
	createNamespace(t, kube, ns)
	return cp, kube, ns
}

// createNamespace creates the namespace ns.
func createNamespace(t *testing.T, kube kubernetes.Interface, ns string) {
	t.Helper()
	if _, err := kube.CoreV1().Namespaces().Create(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// staticMapper maps ConfigMaps without discovery, so that a cache can
// start while the apiserver is down.
func staticMapper() meta.RESTMapper {
	m := meta.NewDefaultRESTMapper(nil)
	m.Add(schema.GroupVersionKind{Version: "v1", Kind: "ConfigMap"}, meta.RESTScopeNamespace)
	return m
}

// TestCache_RestartReplaysFromDisk: a cache's handler gets every stored
// object from the file after a restart while the apiserver is down; after
// changes made while no cache ran and an etcd compaction (a 410 on
// resume, so a relist), the complete old object of the update, the
// delete as DeletedFinalStateUnknown with the last object, and an index
// lookup that agrees.
func TestCache_RestartReplaysFromDisk(t *testing.T) {
	cp, kube, ns := setup(t)
	dir := t.TempDir()
	newCache := jcache.NewFunc(jcache.Options{Dir: dir, NoSync: true})
	opts := crcache.Options{Mapper: staticMapper()}
	createCM(t, kube, ns, "a", map[string]string{"v": "1"}, map[string]string{"k": "1"})
	createCM(t, kube, ns, "b", nil, map[string]string{"k": "b"})

	// First process: list, then stop.
	r1 := startCache(t, newCache, opts, cp)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	var cms corev1.ConfigMapList
	if err := r1.c.List(ctx, &cms, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	if len(cms.Items) != 2 {
		t.Fatalf("List: %d items, want 2", len(cms.Items))
	}
	r1.stop()

	// Second process, the apiserver down: the handler gets both objects
	// from disk.
	r2 := startWhileDown(t, newCache, opts, cp)
	inf := getInformer(t, ctx, r2.c, &corev1.ConfigMap{}, crcache.BlockUntilSynced(false))
	rec := newRecorder()
	reg2, err := inf.AddEventHandler(rec)
	if err != nil {
		t.Fatal(err)
	}
	rec.waitFor(t, "the replay from disk", hasAll("add a labels=map[v:1] data=map[k:1]", "add b labels=map[] data=map[k:b]"))
	if inf.HasSynced() {
		t.Fatal("HasSynced with the apiserver down")
	}
	// The replay done, the apiserver back, nothing changed: the loop's
	// proof is all the registration waits for, and its HasSyncedChecker
	// (controller-runtime's multi-namespace cache and read consistency
	// wait on it) closes, though no event follows.
	checker := reg2.HasSyncedChecker()
	if err := cp.StartAPIServer(ctx); err != nil {
		t.Fatal(err)
	}
	select {
	case <-checker.Done():
	case <-ctx.Done():
		t.Fatal("the registration's HasSyncedChecker never closed after a quiet resume")
	}
	if !reg2.HasSynced() {
		t.Fatal("HasSyncedChecker closed before HasSynced")
	}
	r2.stop()

	// Changed while no cache runs: the next process gets the update with
	// the complete old object, read from the file.
	updateCM(t, ctx, kube, ns, "a", func(a *corev1.ConfigMap) {
		a.Labels["v"], a.Data["k"] = "2", "2"
	})
	deleteCM(t, ctx, kube, ns, "b")
	// etcd compacted past the file's resourceVersion: the resume answers
	// 410 and the next process relists.
	if _, err := cp.Compact(ctx); err != nil {
		t.Fatal(err)
	}
	r3 := startCache(t, newCache, opts, cp)
	defer r3.stop()
	rec3 := newRecorder()
	reg := addHandler(t, ctx, r3.c, &corev1.ConfigMap{}, rec3, crcache.BlockUntilSynced(false))
	// The relist gives a's update with its complete old object (read
	// from the file: the previous process's event) and b's delete,
	// inferred, so wrapped in DeletedFinalStateUnknown, with b's last
	// object.
	rec3.waitFor(t, "the relist's update and delete", hasAll(
		"add a labels=map[v:1] data=map[k:1]",
		"update a labels=map[v:1] data=map[k:1] -> a labels=map[v:2] data=map[k:2]",
		"delete unknown(b labels=map[] data=map[k:b])",
	))
	// An index after the restart and the 410 relist.
	indexData(t, ctx, r3.c, "k")
	disk, scan := jcache.IndexReads()
	for k, want := range map[string]int{"2": 1, "1": 0, "b": 0} {
		var l corev1.ConfigMapList
		if err := r3.c.List(ctx, &l, client.InNamespace(ns), client.MatchingFields{"data.k": k}); err != nil {
			t.Fatal(err)
		}
		if len(l.Items) != want {
			t.Errorf("index data.k=%s: %d items, want %d", k, len(l.Items), want)
		}
	}
	// Registered after the relist: built from the file's objects (once
	// reindexed), then served from it (no read decodes every object).
	if d, s := jcache.IndexReads(); d != disk+3 || s != scan {
		t.Errorf("index reads on disk %d→%d, at read time %d→%d; want 3 on disk, none at read time", disk, d, scan, s)
	}
	if !toolscache.WaitForCacheSync(ctx.Done(), reg.HasSynced) {
		t.Fatal("handler never synced")
	}
}

// TestCache_HandlerAfterSyncAndUpdates: a handler added after sync gets
// every object, then live updates with the complete old object and
// deletes with the last object.
func TestCache_HandlerAfterSyncAndUpdates(t *testing.T) {
	cp, kube, ns := setup(t)
	for i := range 5 {
		createCM(t, kube, ns, fmt.Sprintf("cm%d", i), map[string]string{"i": fmt.Sprint(i)}, map[string]string{"d": "x"})
	}
	r := startCache(t, jcache.NewFunc(jcache.Options{Dir: t.TempDir(), NoSync: true}), crcache.Options{}, cp)
	defer r.stop()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	inf := getInformer(t, ctx, r.c, &corev1.ConfigMap{})
	if !inf.HasSynced() {
		t.Fatal("GetInformer returned before sync")
	}
	rec := newRecorder()
	reg, err := inf.AddEventHandler(rec)
	if err != nil {
		t.Fatal(err)
	}
	var want []string
	for i := range 5 {
		want = append(want, fmt.Sprintf("add cm%d labels=map[i:%d] data=map[d:x]", i, i))
	}
	rec.waitFor(t, "every object", hasAll(want...))
	if !toolscache.WaitForCacheSync(ctx.Done(), reg.HasSynced) {
		t.Fatal("handler never synced")
	}
	updateCM(t, ctx, kube, ns, "cm1", func(cm *corev1.ConfigMap) {
		cm.Labels["i"], cm.Data["d"] = "changed", "y"
	})
	deleteCM(t, ctx, kube, ns, "cm2")
	rec.waitFor(t, "the update and the delete", hasAll(
		"update cm1 labels=map[i:1] data=map[d:x] -> cm1 labels=map[i:changed] data=map[d:y]",
		"delete cm2 labels=map[i:2] data=map[d:x]",
	))

	// RemoveEventHandler: once it returns the handler gets nothing more;
	// another handler, still registered, shows the next event came.
	rec2 := newRecorder()
	if _, err := inf.AddEventHandler(rec2); err != nil {
		t.Fatal(err)
	}
	if err := inf.RemoveEventHandler(reg); err != nil {
		t.Fatal(err)
	}
	rec.mu.Lock()
	before := len(rec.events)
	rec.mu.Unlock()
	createCM(t, kube, ns, "after-remove", nil, nil)
	rec2.waitFor(t, "the next event", hasAll("add after-remove labels=map[] data=map[]"))
	rec.mu.Lock()
	after := rec.events[before:]
	rec.mu.Unlock()
	if len(after) != 0 {
		t.Errorf("a removed handler got %q", after)
	}

	// The reader sees the same, and an index answers from the file.
	indexData(t, ctx, r.c, "d")
	disk, scan := jcache.IndexReads()
	var l corev1.ConfigMapList
	if err := r.c.List(ctx, &l, client.InNamespace(ns), client.MatchingFields{"data.d": "x"}); err != nil {
		t.Fatal(err)
	}
	if d, s := jcache.IndexReads(); d != disk+1 || s != scan {
		t.Errorf("index reads on disk %d→%d, at read time %d→%d; want one on disk", disk, d, scan, s)
	}
	var names []string
	for _, c := range l.Items {
		names = append(names, c.Name)
	}
	sort.Strings(names)
	if fmt.Sprint(names) != "[cm0 cm3 cm4]" {
		t.Fatalf("index data.d=x: %v, want [cm0 cm3 cm4]", names)
	}
}

// TestCache_RemoveInformerReleasesFile: after RemoveInformer the file is
// closed (another writer can open it) and kept; GetInformer again reopens
// it.
func TestCache_RemoveInformerReleasesFile(t *testing.T) {
	cp, kube, ns := setup(t)
	createCM(t, kube, ns, "a", nil, nil)
	dir := t.TempDir()
	r := startCache(t, jcache.NewFunc(jcache.Options{Dir: dir, NoSync: true}), crcache.Options{}, cp)
	defer r.stop()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	inf := getInformer(t, ctx, r.c, &corev1.ConfigMap{})
	files, _ := filepath.Glob(filepath.Join(dir, "configmaps.v1.*.db"))
	if len(files) != 1 {
		t.Fatalf("files %v, want one configmaps file", files)
	}
	if err := r.c.RemoveInformer(ctx, &corev1.ConfigMap{}); err != nil {
		t.Fatal(err)
	}
	// The last informer of the file closes it after it has stopped: the
	// file lock is free then (Open waits for it).
	j, err := journal.Open(files[0], &journal.Options{Timeout: 30 * time.Second})
	if err != nil {
		t.Fatalf("open after RemoveInformer: %v", err)
	}
	if !inf.IsStopped() {
		t.Error("the file is closed but the informer is not stopped")
	}
	_ = j.Close()
	var got corev1.ConfigMap
	if err := r.c.Get(ctx, client.ObjectKey{Namespace: ns, Name: "a"}, &got); err != nil {
		t.Fatalf("Get after RemoveInformer: %v", err)
	}
	if _, err := os.Stat(files[0]); err != nil {
		t.Fatal(err)
	}
}

// TestCache_SecretsWithoutOptions: typed and metadata-only Secrets are
// read with no option at all (the typed ones sealed under the process's
// key).
func TestCache_SecretsWithoutOptions(t *testing.T) {
	cp, kube, ns := setup(t)
	if _, err := kube.CoreV1().Secrets(ns).Create(context.Background(), &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "s", Namespace: ns},
		Data: map[string][]byte{"v": []byte("jsecret-no-options-3e0f51")}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	r := startCache(t, jcache.NewFunc(jcache.Options{Dir: dir, NoSync: true}), crcache.Options{Scheme: scheme.Scheme}, cp)
	defer r.stop()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	var s corev1.SecretList
	if err := r.c.List(ctx, &s, client.InNamespace(ns)); err != nil || len(s.Items) != 1 || string(s.Items[0].Data["v"]) != "jsecret-no-options-3e0f51" {
		t.Fatalf("List of typed Secrets without options = %v, %v; want s with its data", err, s.Items)
	}
	var u unstructured.UnstructuredList
	u.SetGroupVersionKind(schema.GroupVersionKind{Version: "v1", Kind: "SecretList"})
	if err := r.c.List(ctx, &u, client.InNamespace(ns)); err != nil || len(u.Items) != 1 {
		t.Fatalf("List of unstructured Secrets without options = %v, %v; want s", err, u.Items)
	}
	if v, _, _ := unstructured.NestedString(u.Items[0].Object, "data", "v"); v != base64.StdEncoding.EncodeToString([]byte("jsecret-no-options-3e0f51")) {
		t.Fatalf("unstructured Secret data.v = %q", v)
	}
	var m metav1.PartialObjectMetadataList
	m.SetGroupVersionKind(schema.GroupVersionKind{Version: "v1", Kind: "SecretList"})
	if err := r.c.List(ctx, &m, client.InNamespace(ns)); err != nil || len(m.Items) != 1 {
		t.Fatalf("metadata-only Secrets = %v, %v; want s", err, m.Items)
	}
	grepDir(t, dir, "jsecret-no-options-3e0f51")
}

// TestCache_SyncPeriodResyncsFromDisk: with a SyncPeriod, a handler gets
// OnUpdate(obj, obj) for the stored objects each period.
func TestCache_SyncPeriodResyncsFromDisk(t *testing.T) {
	cp, kube, ns := setup(t)
	createCM(t, kube, ns, "a", map[string]string{"v": "1"}, map[string]string{"k": "1"})
	period := 300 * time.Millisecond
	r := startCache(t, jcache.NewFunc(jcache.Options{Dir: t.TempDir(), NoSync: true}), crcache.Options{SyncPeriod: &period}, cp)
	defer r.stop()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	rec := newRecorder()
	addHandler(t, ctx, r.c, &corev1.ConfigMap{}, rec)
	rec.waitFor(t, "a resync", hasAll("add a labels=map[v:1] data=map[k:1]",
		"update a labels=map[v:1] data=map[k:1] -> a labels=map[v:1] data=map[k:1]"))
}
