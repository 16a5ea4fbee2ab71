package jcache_test

import (
	"context"
	"errors"
	"path/filepath"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	toolscache "k8s.io/client-go/tools/cache"
	crcache "sigs.k8s.io/controller-runtime/pkg/cache"

	"github.com/watchjournal/watchjournal/jcache"
	"github.com/watchjournal/watchjournal/journal"
)

// TestCache_RemoveInformerSharedFile: a typed and an unstructured
// informer of ConfigMaps share one file. RemoveInformer of the typed one
// stops it (its handler gets nothing more) and keeps the file open and
// written for the other (an Open of it is refused: ErrLocked), whose
// handler still gets a new object; RemoveInformer of the last one stops
// its journal and releases the file (an Open takes its lock).
func TestCache_RemoveInformerSharedFile(t *testing.T) {
	cp, kube, ns := setup(t)
	createCM(t, kube, ns, "a", nil, nil)
	dir := t.TempDir()
	r := startCache(t, jcache.NewFunc(jcache.Options{Dir: dir, NoSync: true}), crcache.Options{}, cp)
	defer r.stop()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(schema.GroupVersionKind{Version: "v1", Kind: "ConfigMap"})
	typed := getInformer(t, ctx, r.c, &corev1.ConfigMap{})
	untyped := getInformer(t, ctx, r.c, u)
	files, _ := filepath.Glob(filepath.Join(dir, "configmaps.v1.*.db"))
	if len(files) != 1 {
		t.Fatalf("files %v, want one configmaps file for both informers", files)
	}
	name := func(o any) string {
		if d, ok := o.(toolscache.DeletedFinalStateUnknown); ok {
			o = d.Obj
		}
		switch o := o.(type) {
		case *corev1.ConfigMap:
			return o.Name
		case *unstructured.Unstructured:
			return o.GetName()
		}
		return "?"
	}
	recs := map[string]*recorder{"typed": newRecorder(), "unstructured": newRecorder()}
	for k, inf := range map[string]crcache.Informer{"typed": typed, "unstructured": untyped} {
		rec := recs[k]
		if _, err := inf.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
			AddFunc:    func(o any) { rec.add("add " + name(o)) },
			UpdateFunc: func(_, o any) { rec.add("update " + name(o)) },
			DeleteFunc: func(o any) { rec.add("delete " + name(o)) },
		}); err != nil {
			t.Fatal(err)
		}
		rec.waitFor(t, k+" replay", hasAll("add a"))
	}

	if err := r.c.RemoveInformer(ctx, &corev1.ConfigMap{}); err != nil {
		t.Fatal(err)
	}
	// controller-runtime's RemoveInformer cancels the informer's Run; it
	// stops after that returns.
	if err := wait.PollUntilContextTimeout(ctx, 5*time.Millisecond, 30*time.Second, true, func(context.Context) (bool, error) {
		return typed.IsStopped(), nil
	}); err != nil {
		t.Fatalf("the typed informer did not stop after RemoveInformer: %v", err)
	}
	if untyped.IsStopped() {
		t.Fatal("RemoveInformer(typed) stopped the unstructured informer of the same file")
	}
	if j, err := journal.Open(files[0], &journal.Options{Timeout: -1}); !errors.Is(err, journal.ErrLocked) {
		if err == nil {
			_ = j.Close()
		}
		t.Fatalf("Open while the unstructured informer runs = %v; want ErrLocked (the file still has its writer)", err)
	}
	recs["typed"].mu.Lock()
	before := len(recs["typed"].events)
	recs["typed"].mu.Unlock()
	createCM(t, kube, ns, "b", nil, nil)
	recs["unstructured"].waitFor(t, "the remaining informer's add", hasAll("add b"))
	recs["typed"].mu.Lock()
	after := append([]string(nil), recs["typed"].events[before:]...)
	recs["typed"].mu.Unlock()
	if len(after) != 0 {
		t.Errorf("the removed typed informer's handler got %q", after)
	}

	if err := r.c.RemoveInformer(ctx, u); err != nil {
		t.Fatal(err)
	}
	j, err := journal.Open(files[0], &journal.Options{Timeout: 30 * time.Second})
	if err != nil {
		t.Fatalf("open after the last RemoveInformer: %v", err)
	}
	defer j.Close()
	if !untyped.IsStopped() {
		t.Error("the file is released but the unstructured informer is not stopped")
	}
	if e, ok, err := j.Lookup(ns + "/b"); err != nil || !ok || e.UID == "" {
		t.Errorf("Lookup(%s/b) in the released file = %+v, %v, %v; want the entry the shared loop wrote", ns, e, ok, err)
	}
}
