package cache_test

import (
	"context"
	"fmt"
	"path/filepath"
	"sort"
	"testing"
	"time"

	"github.com/go-logr/logr/testr"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/watchjournal/watchjournal/internal/testing/controlplane"
	"github.com/watchjournal/watchjournal/journal"
	"github.com/watchjournal/watchjournal/journal/cache"
	"github.com/watchjournal/watchjournal/journal/compactor"
	"github.com/watchjournal/watchjournal/reconcile"
)

// process is one writer process's state: a journal opened from the file
// and a loop filling it.
type process struct {
	j    *journal.Journal
	loop *reconcile.Loop
	stop func()
}

func start(t *testing.T, cp *controlplane.ControlPlane, path string, res journal.Resource) *process {
	t.Helper()
	j, err := journal.Open(path, &journal.Options{Resource: &res, NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	_ = cache.NewReader(j, scheme.Scheme) // keeps objects from the first list on
	loop, err := reconcile.New(cp.RESTConfig(), j, reconcile.Options{MinBackoff: 20 * time.Millisecond, MaxBackoff: 300 * time.Millisecond, Logger: testr.New(t)})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- loop.Run(ctx) }()
	wctx, wcancel := context.WithTimeout(ctx, 60*time.Second)
	defer wcancel()
	if err := loop.WaitForSync(wctx); err != nil {
		t.Fatalf("WaitForSync: %v; last status %+v", err, loop.Status())
	}
	return &process{j: j, loop: loop, stop: func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run = %v", err)
		}
		_ = j.Close()
	}}
}

// state renders ConfigMaps as key → uid/rv/data, sorted.
func state(items []corev1.ConfigMap) string {
	var s []string
	for _, cm := range items {
		s = append(s, fmt.Sprintf("%s/%s uid=%s rv=%s labels=%v data=%v", cm.Namespace, cm.Name, cm.UID, cm.ResourceVersion, cm.Labels, cm.Data))
	}
	sort.Strings(s)
	return fmt.Sprint(s)
}

// waitEqual waits until the reader's typed and unstructured List, its Get
// of each object and the lister all equal the server's ConfigMaps in ns,
// waking on each journal commit; on timeout it prints both sides.
func waitEqual(t *testing.T, kube kubernetes.Interface, j *journal.Journal, ns, when string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	r := cache.NewReader(j, scheme.Scheme)
	lister := cache.NewLister(j, cache.Typed[*corev1.ConfigMap](scheme.Scheme))
	var server, got string
	for {
		sl, err := kube.CoreV1().ConfigMaps(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		server = state(sl.Items)
		var l corev1.ConfigMapList
		head, err := r.ListAt(ctx, &l, client.InNamespace(ns))
		if err != nil {
			t.Fatalf("%s: List: %v", when, err)
		}
		got = state(l.Items)
		if got == server {
			checkOthers(t, r, lister, ns, sl.Items, when)
			if h, _ := j.Head(); h < head {
				t.Errorf("%s: ListAt head %d past the journal head %d", when, head, h)
			}
			return
		}
		wctx, wcancel := context.WithTimeout(ctx, time.Second)
		_ = j.Wait(wctx, head)
		wcancel()
		if ctx.Err() != nil {
			t.Fatalf("%s: the reader never equalled the server\n server: %s\n reader: %s", when, server, got)
		}
	}
}

// checkOthers checks Get (typed, unstructured), the unstructured List and
// the lister against the server's items.
func checkOthers(t *testing.T, r *cache.Reader, lister *cache.Lister[*corev1.ConfigMap], ns string, want []corev1.ConfigMap, when string) {
	t.Helper()
	ctx := context.Background()
	server := state(want)
	var ul unstructured.UnstructuredList
	ul.SetGroupVersionKind(schema.GroupVersionKind{Version: "v1", Kind: "ConfigMapList"})
	if err := r.List(ctx, &ul, client.InNamespace(ns)); err != nil || len(ul.Items) != len(want) {
		t.Errorf("%s: unstructured List = %d items, %v; want %d", when, len(ul.Items), err, len(want))
	}
	var typed []corev1.ConfigMap
	for _, w := range want {
		var cm corev1.ConfigMap
		if err := r.Get(ctx, client.ObjectKeyFromObject(&w), &cm); err != nil {
			t.Errorf("%s: Get %s/%s: %v", when, w.Namespace, w.Name, err)
		}
		typed = append(typed, cm)
		u := &unstructured.Unstructured{}
		u.SetGroupVersionKind(schema.GroupVersionKind{Version: "v1", Kind: "ConfigMap"})
		if err := r.Get(ctx, client.ObjectKeyFromObject(&w), u); err != nil || u.GetUID() != w.UID || u.GetResourceVersion() != w.ResourceVersion {
			t.Errorf("%s: unstructured Get %s/%s = uid %s rv %s, %v; want %s %s", when, w.Namespace, w.Name, u.GetUID(), u.GetResourceVersion(), err, w.UID, w.ResourceVersion)
		}
	}
	if got := state(typed); got != server {
		t.Errorf("%s: typed Get of each\n got  %s\n want %s", when, got, server)
	}
	ptrs, err := lister.Namespace(ns).List(labels.Everything())
	var vals []corev1.ConfigMap
	for _, p := range ptrs {
		vals = append(vals, *p)
	}
	if got := state(vals); err != nil || got != server {
		t.Errorf("%s: lister List = %s, %v; want %s", when, got, err, server)
	}
}

// Ensure that Get and List equal the server's objects after a watch, after
// retention trimming, after a restart whose stored resourceVersion was
// compacted (a 410 relist), after a plain restart (resumed watch), and
// after same-name recreations (new UID) both while down and while live.
func TestReader_EqualsServer(t *testing.T) {
	ns := "lister"
	cp, ctx, kube := startNamespace(t, ns, 4*time.Minute)
	cms := kube.CoreV1().ConfigMaps(ns)
	create := func(name, v string) {
		t.Helper()
		if _, err := cms.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"v": v}}, Data: map[string]string{"v": v}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	update := func(name, v string) {
		t.Helper()
		cm, err := cms.Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		cm.Data = map[string]string{"v": v}
		if _, err := cms.Update(ctx, cm, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	del := func(name string) {
		t.Helper()
		if err := cms.Delete(ctx, name, metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	for _, n := range []string{"a", "b", "c"} {
		create(n, "1")
	}
	path := filepath.Join(t.TempDir(), "j.db")
	res := journal.Resource{GVR: schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}, Namespace: ns}

	p := start(t, cp, path, res)
	waitEqual(t, kube, p.j, ns, "after the initial list")
	update("a", "2")
	del("c")
	create("d", "1")
	del("b") // same name, new UID, while live
	create("b", "2")
	waitEqual(t, kube, p.j, ns, "after watched changes")

	head, _ := p.j.Head()
	if _, err := compactor.New(p.j, compactor.Policy{MaxEvents: 1}, compactor.Options{}).Trim(); err != nil {
		t.Fatal(err)
	}
	if evs, err := p.j.Read(0, 100); err != nil || len(evs) > 1 {
		t.Fatalf("journal after trimming to 1 event: %d events, %v", len(evs), err)
	}
	waitEqual(t, kube, p.j, ns, "after retention trimming")
	p.stop()

	// Down: changes, a same-name recreation, then etcd compaction: the
	// restart's resume meets a 410 and relists.
	update("b", "3")
	del("d")
	del("a")
	create("a", "3")
	create("e", "1")
	if _, err := cp.Compact(ctx); err != nil {
		t.Fatal(err)
	}
	p = start(t, cp, path, res)
	if err := p.loop.WaitFor(ctx, func(s reconcile.Status) bool { return s.Lists >= 1 }); err != nil {
		t.Fatal(err)
	}
	if evs, _ := p.j.Read(head+1, 100); len(evs) == 0 || evs[0].Origin == journal.OriginWatch {
		t.Fatalf("events after the restart: %+v; want the relist's", evs)
	}
	waitEqual(t, kube, p.j, ns, "after a 410 relist at restart")
	p.stop()

	// A plain restart: nothing compacted, the watch resumes.
	p = start(t, cp, path, res)
	waitEqual(t, kube, p.j, ns, "after a restart")
	update("e", "2")
	waitEqual(t, kube, p.j, ns, "after a watched change past the restart")
	p.stop()
}

// Ensure that a metadata-only journal (Secrets) serves the metadata it
// stored: Get and List give each Secret's name, UID and resourceVersion as
// the server has them, and no data.
func TestReader_MetadataOnlyServesMetadata(t *testing.T) {
	ns := "meta"
	cp, ctx, kube := startNamespace(t, ns, 2*time.Minute)
	sec, err := kube.CoreV1().Secrets(ns).Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "s", Labels: map[string]string{"a": "b"}}, StringData: map[string]string{"k": "secret"}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	res := journal.Resource{GVR: schema.GroupVersionResource{Version: "v1", Resource: "secrets"}, Namespace: ns, MetadataOnly: true}
	p := start(t, cp, filepath.Join(t.TempDir(), "s.db"), res)
	defer p.stop()
	r := cache.NewReader(p.j, scheme.Scheme)
	var got corev1.Secret
	if err := r.Get(ctx, client.ObjectKeyFromObject(sec), &got); err != nil || got.UID != sec.UID || got.ResourceVersion != sec.ResourceVersion || got.Labels["a"] != "b" || len(got.Data) != 0 {
		t.Fatalf("Get of a Secret from a metadata-only journal = %+v, %v; want uid %s rv %s, its labels, no data", got, err, sec.UID, sec.ResourceVersion)
	}
	var l unstructured.UnstructuredList
	l.SetGroupVersionKind(schema.GroupVersionKind{Version: "v1", Kind: "SecretList"})
	if err := r.List(ctx, &l, client.MatchingLabels{"a": "b"}); err != nil || len(l.Items) != 1 || l.Items[0].Object["data"] != nil || l.Items[0].GetName() != "s" {
		t.Fatalf("List from a metadata-only journal = %+v, %v; want s with metadata only", l.Items, err)
	}
}
