package jcache_test

import (
	"context"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	crcache "sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/watchjournal/watchjournal/jcache"
	"github.com/watchjournal/watchjournal/reconcile"
)

// TestCache_GetAfterEventDecodesNothing: a Get of the object, stored as
// JSON, a handler was just given (its add, then its update) decodes
// nothing and equals
// controller-runtime's cache's Get of it; a Get of an object no handler
// was given decodes it; a deleted object is NotFound.
func TestCache_GetAfterEventDecodesNothing(t *testing.T) {
	cp, kube, ns := setup(t)
	createCM(t, kube, ns, "before", map[string]string{"a": "1"}, map[string]string{"k": "v"})
	var decodes atomic.Int64
	// Objects stored as JSON, as custom resources are (recent.go keeps
	// no protobuf objects: their decode costs what a deep copy does).
	jo := jcache.Options{Dir: t.TempDir(), NoSync: true, Loop: reconcile.Options{Wire: reconcile.WireJSON}}
	jr := startCache(t, jcache.NewFunc(jcache.WithReadDecodes(jo, &decodes)), crcache.Options{}, cp)
	defer jr.stop()
	cr := startCache(t, crcache.New, crcache.Options{}, cp)
	defer cr.stop()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	rec := newRecorder()
	addHandler(t, ctx, jr.c, &corev1.ConfigMap{}, rec)
	rec.waitFor(t, "the replay", hasAll("add before labels=map[a:1] data=map[k:v]"))

	// same Gets key from both caches once crcache has rv, and reports
	// how many objects jcache's Get decoded.
	same := func(what, name, rv string) int64 {
		t.Helper()
		key := client.ObjectKey{Namespace: ns, Name: name}
		var want corev1.ConfigMap
		deadline := time.Now().Add(30 * time.Second)
		for {
			err := cr.c.Get(ctx, key, &want)
			if err == nil && want.ResourceVersion == rv {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: controller-runtime's cache did not reach resourceVersion %s: %v, %s", what, rv, err, want.ResourceVersion)
			}
			time.Sleep(20 * time.Millisecond)
		}
		decodes.Store(0)
		var got corev1.ConfigMap
		if err := jr.c.Get(ctx, key, &got); err != nil {
			t.Fatalf("%s: Get = %v", what, err)
		}
		if !apiequality.Semantic.DeepEqual(got, want) {
			t.Errorf("%s: jcache's Get = %+v\ncontroller-runtime's = %+v", what, got, want)
		}
		return decodes.Load()
	}

	cm := createCM(t, kube, ns, "a", map[string]string{"a": "1"}, map[string]string{"k": "1"})
	rec.waitFor(t, "the add", hasAll("add a labels=map[a:1] data=map[k:1]"))
	if d := same("after its add", "a", cm.ResourceVersion); d != 0 {
		t.Errorf("after its add: the Get decoded %d objects, want 0", d)
	}
	cm.Data["k"] = "2"
	cm, err := kube.CoreV1().ConfigMaps(ns).Update(ctx, cm, metav1.UpdateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	rec.waitFor(t, "the update", hasAll("update a labels=map[a:1] data=map[k:1] -> a labels=map[a:1] data=map[k:2]"))
	if d := same("after its update", "a", cm.ResourceVersion); d != 0 {
		t.Errorf("after its update: the Get decoded %d objects, want 0", d)
	}
	// Two Gets return objects of their own.
	var g1, g2 corev1.ConfigMap
	if err := jr.c.Get(ctx, client.ObjectKeyFromObject(cm), &g1); err != nil {
		t.Fatal(err)
	}
	g1.Data["k"] = "changed by the caller"
	if err := jr.c.Get(ctx, client.ObjectKeyFromObject(cm), &g2); err != nil || g2.Data["k"] != "2" {
		t.Errorf("a Get after the caller changed an earlier Get's object = %v, %v; want data k=2", g2.Data, err)
	}

	deleteCM(t, ctx, kube, ns, "a")
	rec.waitFor(t, "the delete", func(evs []string) bool {
		return slices.Contains(evs, "delete a labels=map[a:1] data=map[k:2]")
	})
	if err := jr.c.Get(ctx, client.ObjectKeyFromObject(cm), &g2); err == nil {
		t.Errorf("Get of a deleted object = %+v; want NotFound", g2)
	}
}
