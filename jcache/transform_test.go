package jcache_test

// Transforms before the disk: what cache.Options.DefaultTransform removes
// never reaches a journal file (watch events, relists, tombstones), reads
// and handlers get transformed objects, and a changed transform across
// restarts (a new TransformID) serves nothing the new one drops.

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/wait"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"
	"k8s.io/client-go/kubernetes"
	toolscache "k8s.io/client-go/tools/cache"
	ctrl "sigs.k8s.io/controller-runtime"
	crcache "sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/watchjournal/watchjournal/internal/testing/controlplane"
	"github.com/watchjournal/watchjournal/jcache"
	"github.com/watchjournal/watchjournal/journal"
)

// fieldManager is the server-side apply field manager of the test's
// ConfigMaps: their managedFields name it.
const fieldManager = "wj-test-manager"

// tokenKey is the annotation dropAnnotations("secret.example/token")
// removes.
const tokenKey = "secret.example/token"

// dropAnnotations returns a transform that removes the annotations keys.
func dropAnnotations(keys ...string) toolscache.TransformFunc {
	return func(o any) (any, error) {
		if m, ok := o.(metav1.Object); ok {
			a := m.GetAnnotations()
			for _, k := range keys {
				delete(a, k)
			}
			m.SetAnnotations(a)
		}
		return o, nil
	}
}

// applyCMs creates n ConfigMaps name(i) in ns by server-side apply as
// fieldManager, with five data keys, 16 at a time.
func applyCMs(t *testing.T, kube kubernetes.Interface, ns string, n int) {
	t.Helper()
	each(t, n, 16, func(i int) error {
		ac := corev1ac.ConfigMap(cmName(i), ns).WithData(map[string]string{
			"alpha": "1", "beta": "2", "gamma": "3", "delta": "4", "epsilon": "5"})
		_, err := kube.CoreV1().ConfigMaps(ns).Apply(context.Background(), ac, metav1.ApplyOptions{FieldManager: fieldManager})
		return err
	})
}

// filesHolding returns the files of dir whose bytes contain s, and the
// size of dir's journal files in bytes. Read with no cache running.
func filesHolding(t *testing.T, dir, s string) (holding []string, size int64) {
	t.Helper()
	err := filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		if strings.HasSuffix(p, ".db") {
			size += int64(len(b))
		}
		if bytes.Contains(b, []byte(s)) {
			holding = append(holding, filepath.Base(p))
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return holding, size
}

// journalBytes returns the sum of the retained events' bytes
// (journal.Stats.JournalBytes) of dir's journal files.
func journalBytes(t *testing.T, dir string) uint64 {
	t.Helper()
	paths, err := filepath.Glob(filepath.Join(dir, "*.db"))
	if err != nil {
		t.Fatal(err)
	}
	var n uint64
	for _, p := range paths {
		j, err := journal.Open(p, &journal.Options{ReadOnly: true})
		if err != nil {
			t.Fatal(err)
		}
		st, err := j.Stats()
		_ = j.Close()
		if err != nil {
			t.Fatal(err)
		}
		n += st.JournalBytes
	}
	return n
}

// waitCached waits until the cache c lists the ConfigMaps of ns that
// cond accepts, and prints the last list seen on timeout.
func waitCached(t *testing.T, c client.Reader, ns, what string, cond func([]corev1.ConfigMap) bool) []corev1.ConfigMap {
	t.Helper()
	var got []corev1.ConfigMap
	err := wait.PollUntilContextTimeout(context.Background(), 20*time.Millisecond, 60*time.Second, true, func(ctx context.Context) (bool, error) {
		var l corev1.ConfigMapList
		if err := c.List(ctx, &l, client.InNamespace(ns)); err != nil {
			return false, err
		}
		got = l.Items
		return cond(got), nil
	})
	if err != nil {
		var last []string
		for _, cm := range got {
			last = append(last, fmt.Sprintf("%s rv=%s annotations=%v data=%v", cm.Name, cm.ResourceVersion, cm.Annotations, cm.Data))
		}
		t.Fatalf("waiting for %s: %v; the cache lists %d: %q", what, err, len(got), last)
	}
	return got
}

// transformManager is a manager on a jcache directory with a transform,
// and a ConfigMap handler that records what it is given.
type transformManager struct {
	c    client.Client
	seen *seenObjects
	stop func()
}

// stopGivenNone stops m, then checks that its handler was given no object
// holding key; what names the run in a failure.
func (m *transformManager) stopGivenNone(t *testing.T, what, key string) {
	t.Helper()
	m.stop()
	for _, s := range m.seen.all() {
		if strings.Contains(s, key) {
			t.Errorf("%s: the handler was given %s; want no %s", what, s, key)
		}
	}
}

// seenObjects records each object a handler is given, printed.
type seenObjects struct {
	mu   sync.Mutex
	objs []string
}

func (s *seenObjects) add(o any) {
	if d, ok := o.(toolscache.DeletedFinalStateUnknown); ok {
		o = d.Obj
	}
	cm := o.(*corev1.ConfigMap)
	s.mu.Lock()
	defer s.mu.Unlock()
	s.objs = append(s.objs, fmt.Sprintf("%s annotations=%v managedFields=%d", cm.Name, cm.Annotations, len(cm.ManagedFields)))
}

func (s *seenObjects) all() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.objs...)
}

// startTransformManager starts a manager whose cache is jcache's on dir
// (namespace ns only) with DefaultTransform tr and o's TransformID, adds
// a recording ConfigMap handler and waits for the cache's sync.
func startTransformManager(t *testing.T, cp *controlplane.ControlPlane, dir, ns string, tr toolscache.TransformFunc, id string) *transformManager {
	t.Helper()
	mgr := newManager(t, cp.RESTConfig(), ctrl.Options{
		NewCache: jcache.NewFunc(jcache.Options{Dir: dir, NoSync: true, TransformID: id}),
		Cache:    crcache.Options{DefaultNamespaces: map[string]crcache.Config{ns: {}}, DefaultTransform: tr},
	})
	inf := getInformer(t, context.Background(), mgr.GetCache(), &corev1.ConfigMap{})
	seen := &seenObjects{}
	if _, err := inf.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
		AddFunc:    func(o any) { seen.add(o) },
		UpdateFunc: func(old, o any) { seen.add(old); seen.add(o) },
		DeleteFunc: func(o any) { seen.add(o) },
	}); err != nil {
		t.Fatal(err)
	}
	stop := runManager(t, mgr).stop
	waitSynced(t, mgr.GetCache(), 60*time.Second)
	return &transformManager{c: mgr.GetClient(), seen: seen, stop: stop}
}

// TestCache_TransformStripsManagedFieldsBeforeTheDisk: ConfigMaps created
// by server-side apply carry managedFields naming the field manager; with
// DefaultTransform = TransformStripManagedFields the cache's files never
// hold that name, and reads get objects without managedFields. Without
// the transform the files hold it (and are larger: both sizes are logged).
func TestCache_TransformStripsManagedFieldsBeforeTheDisk(t *testing.T) {
	cp, kube, ns := setup(t)
	const n = 1000
	applyCMs(t, kube, ns, n)
	all := func(cms []corev1.ConfigMap) bool { return len(cms) == n }

	sizes, events := map[string]int64{}, map[string]uint64{}
	for _, run := range []struct {
		name string
		tr   toolscache.TransformFunc
	}{{"without a transform", nil}, {"with TransformStripManagedFields", crcache.TransformStripManagedFields()}} {
		dir := t.TempDir()
		m := startTransformManager(t, cp, dir, ns, run.tr, "")
		cms := waitCached(t, m.c, ns, "every ConfigMap", all)
		m.stop()
		holding, size := filesHolding(t, dir, fieldManager)
		sizes[run.name], events[run.name] = size, journalBytes(t, dir)
		if run.tr == nil {
			if len(cms[0].ManagedFields) == 0 || len(holding) == 0 {
				t.Fatalf("%s: read %d managedFields, files holding %q: %q; want both (the test's ConfigMaps carry managedFields)", run.name, len(cms[0].ManagedFields), fieldManager, holding)
			}
			continue
		}
		for _, cm := range cms {
			if len(cm.ManagedFields) != 0 {
				t.Fatalf("%s: the cache reads %s with managedFields %v; want none", run.name, cm.Name, cm.ManagedFields)
			}
		}
		if len(holding) != 0 {
			t.Errorf("%s: files %q hold the field manager %q; want none", run.name, holding, fieldManager)
		}
	}
	t.Logf("journal files of %d server-side applied ConfigMaps: %d bytes (events %d bytes) without a transform, %d bytes (events %d bytes) with TransformStripManagedFields",
		n, sizes["without a transform"], events["without a transform"], sizes["with TransformStripManagedFields"], events["with TransformStripManagedFields"])
}

// TestCache_TransformDropsAnnotationBeforeTheDisk: a transform drops the
// annotation secret.example/token; none of the values it had reaches a
// file, whether the object came by a watch (create, update, a DELETED
// with its last object) or by a relist after an etcd compaction (an
// update and a delete while no cache ran). Reads through the manager's
// client and the handler's objects have no such annotation.
func TestCache_TransformDropsAnnotationBeforeTheDisk(t *testing.T) {
	cp, kube, ns := setup(t)
	dir := t.TempDir()
	ctx := context.Background()
	cms := kube.CoreV1().ConfigMaps(ns)
	token := func(step string) map[string]string {
		return map[string]string{tokenKey: "wjtoken-" + step, "keep": "yes"}
	}
	for _, name := range []string{"a", "b", "c"} {
		if _, err := cms.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Annotations: token("create-" + name)},
			Data: map[string]string{"v": "1"}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	tr := dropAnnotations(tokenKey)
	m := startTransformManager(t, cp, dir, ns, tr, "")
	waitCached(t, m.c, ns, "a, b and c", func(l []corev1.ConfigMap) bool { return len(l) == 3 })

	// Watch events: an update of a, the delete of c (its DELETED carries
	// its last object, annotation included, from the server).
	updateCM(t, ctx, kube, ns, "a", func(a *corev1.ConfigMap) {
		a.Annotations, a.Data["v"] = token("update-a"), "2"
	})
	deleteCM(t, ctx, kube, ns, "c")
	got := waitCached(t, m.c, ns, "a's update and c's delete", func(l []corev1.ConfigMap) bool {
		return len(l) == 2 && l[0].Name == "a" && l[0].Data["v"] == "2"
	})
	for _, cm := range got {
		if _, ok := cm.Annotations[tokenKey]; ok || cm.Annotations["keep"] != "yes" {
			t.Errorf("List reads %s with annotations %v; want keep=yes without %s", cm.Name, cm.Annotations, tokenKey)
		}
	}
	var one corev1.ConfigMap
	if err := m.c.Get(ctx, client.ObjectKey{Namespace: ns, Name: "b"}, &one); err != nil {
		t.Fatal(err)
	}
	if _, ok := one.Annotations[tokenKey]; ok {
		t.Errorf("Get reads b with annotations %v; want no %s", one.Annotations, tokenKey)
	}
	m.stopGivenNone(t, "the watch events", tokenKey)

	// While no cache runs: an update of a and the delete of b, then an
	// etcd compaction: the next start's resume answers 410 and relists.
	updateCM(t, ctx, kube, ns, "a", func(a *corev1.ConfigMap) {
		a.Annotations, a.Data["v"] = token("relist-a"), "3"
	})
	deleteCM(t, ctx, kube, ns, "b")
	if _, err := cp.Compact(ctx); err != nil {
		t.Fatal(err)
	}
	m2 := startTransformManager(t, cp, dir, ns, tr, "")
	waitCached(t, m2.c, ns, "the relist's update of a and delete of b", func(l []corev1.ConfigMap) bool {
		return len(l) == 1 && l[0].Name == "a" && l[0].Data["v"] == "3"
	})
	m2.stopGivenNone(t, "after the relist", tokenKey)
	if holding, _ := filesHolding(t, dir, "wjtoken-"); len(holding) != 0 {
		t.Errorf("files %q hold a value of %s; want none", holding, tokenKey)
	}
	if holding, _ := filesHolding(t, dir, "keep"); len(holding) == 0 {
		t.Error("no file holds the annotation the transform keeps: the scan reads the wrong files")
	}
}

// TestCache_ChangedTransformAcrossRestart: run 1 keeps the annotation
// example.com/a (TransformID v1); run 2 drops it (TransformID v2). After
// run 2's start no read and no handler sees it, and the file no longer
// holds its value; run 3 keeps it again (v1) and reads it, listed anew.
func TestCache_ChangedTransformAcrossRestart(t *testing.T) {
	cp, kube, ns := setup(t)
	dir := t.TempDir()
	const key = "example.com/a"
	for _, name := range []string{"x", "y"} {
		createCMWithAnnotations(t, kube, ns, name, map[string]string{key: "wjvalue-" + name})
	}
	has := func(want bool) func([]corev1.ConfigMap) bool {
		return func(l []corev1.ConfigMap) bool {
			if len(l) != 2 {
				return false
			}
			for _, cm := range l {
				if _, ok := cm.Annotations[key]; ok != want {
					return false
				}
			}
			return true
		}
	}
	r1 := startTransformManager(t, cp, dir, ns, dropAnnotations(tokenKey), "v1")
	waitCached(t, r1.c, ns, "x and y with "+key, has(true))
	r1.stop()

	r2 := startTransformManager(t, cp, dir, ns, dropAnnotations(tokenKey, key), "v2")
	// The first read after the sync: nothing stored under v1 is served.
	var l corev1.ConfigMapList
	if err := r2.c.List(context.Background(), &l, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	if !has(false)(l.Items) {
		t.Errorf("run 2 (v2 drops %s) lists %d ConfigMaps: %v; want x and y without it", key, len(l.Items), l.Items)
	}
	var x corev1.ConfigMap
	if err := r2.c.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: "x"}, &x); err != nil {
		t.Fatal(err)
	}
	if _, ok := x.Annotations[key]; ok {
		t.Errorf("run 2 gets x with annotations %v; want no %s", x.Annotations, key)
	}
	r2.stopGivenNone(t, "run 2", key)
	if holding, _ := filesHolding(t, dir, "wjvalue-"); len(holding) != 0 {
		t.Errorf("after run 2 files %q hold a value of %s; want none", holding, key)
	}

	r3 := startTransformManager(t, cp, dir, ns, dropAnnotations(tokenKey), "v1")
	defer r3.stop()
	waitCached(t, r3.c, ns, "run 3 (v1 again) reads "+key, has(true))
}

// TestCache_TransformConflictOnOneFile: a typed and an unstructured
// informer of ConfigMaps share a file; two caches on one directory give
// them different transforms: the second is refused with a
// *TransformConflictError, the same function value is accepted.
func TestCache_TransformConflictOnOneFile(t *testing.T) {
	cp, _, ns := setup(t)
	dir := t.TempDir()
	tr := dropAnnotations(tokenKey)
	newCache := jcache.NewFunc(jcache.Options{Dir: dir, NoSync: true})
	opts := func(tr toolscache.TransformFunc) crcache.Options {
		return crcache.Options{DefaultNamespaces: map[string]crcache.Config{ns: {}}, DefaultTransform: tr}
	}
	r1 := startCache(t, newCache, opts(tr), cp)
	defer r1.stop()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	getInformer(t, ctx, r1.c, &corev1.ConfigMap{})
	u := &unstructured.Unstructured{}
	u.SetAPIVersion("v1")
	u.SetKind("ConfigMap")

	same := startCache(t, newCache, opts(tr), cp)
	defer same.stop()
	if _, err := same.c.GetInformer(ctx, u); err != nil {
		t.Errorf("an unstructured informer with the same transform value: %v; want it accepted", err)
	}
	other := startCache(t, newCache, opts(dropAnnotations(tokenKey)), cp)
	defer other.stop()
	_, err := other.c.GetInformer(ctx, u, crcache.BlockUntilSynced(false))
	var conflict *jcache.TransformConflictError
	if !errors.As(err, &conflict) || !errors.Is(err, jcache.ErrTransformConflict) {
		t.Fatalf("an unstructured informer with another transform: %v; want a *TransformConflictError", err)
	}
	if !strings.Contains(err.Error(), "DefaultTransform") {
		t.Errorf("the conflict %q does not name the option", err)
	}
}

func createCMWithAnnotations(t *testing.T, kube kubernetes.Interface, ns, name string, annotations map[string]string) {
	t.Helper()
	if _, err := kube.CoreV1().ConfigMaps(ns).Create(context.Background(), &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Annotations: annotations}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}
