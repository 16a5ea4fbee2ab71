package jcache_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes/scheme"
	toolscache "k8s.io/client-go/tools/cache"
	crcache "sigs.k8s.io/controller-runtime/pkg/cache"

	"github.com/watchjournal/watchjournal/jcache"
	"github.com/watchjournal/watchjournal/journal"
	"github.com/watchjournal/watchjournal/reconcile"
)

// relistDelete waits for the object a handler's OnDelete sends on
// deleted, failing with none when ctx ends first, and returns it as the
// DeletedFinalStateUnknown a relist's inferred delete gives.
func relistDelete(t *testing.T, ctx context.Context, deleted <-chan any, none string) toolscache.DeletedFinalStateUnknown {
	t.Helper()
	var got any
	select {
	case got = <-deleted:
	case <-ctx.Done():
		t.Fatal(none)
	}
	d, ok := got.(toolscache.DeletedFinalStateUnknown)
	if !ok {
		t.Fatalf("OnDelete(%T); want a DeletedFinalStateUnknown for a delete a relist found", got)
	}
	return d
}

// TestCache_RelistDeleteAfterTrimHasLastObject: an object created and
// updated, its records trimmed past by retention, deleted while no cache
// runs, and etcd compacted (the resume answers 410, so the deletion is
// found by a relist). After the restart the handler's OnDelete gets a
// DeletedFinalStateUnknown whose Obj is the complete last object (labels,
// annotations, data, UID, resourceVersion as the server last served it),
// as client-go's informer gives for a delete it finds by relisting: the
// journal stored the relist's DELETED with the key's last object, though
// no record of the key was left.
func TestCache_RelistDeleteAfterTrimHasLastObject(t *testing.T) {
	cp, kube, ns := setup(t)
	dir := t.TempDir()
	newCache := jcache.NewFunc(jcache.WithRetentionInterval(jcache.Options{Dir: dir, NoSync: true, Retention: &journal.Retention{MaxEvents: 2},
		Loop: reconcile.Options{MaxBackoff: 300 * time.Millisecond}}, 20*time.Millisecond))
	opts := crcache.Options{Mapper: staticMapper()}
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	createCM(t, kube, ns, "gone", map[string]string{"v": "1"}, map[string]string{"k": "1"})

	// First process: the list (gone's ADDED at offset 1), gone's update
	// (offset 2), then three more objects; retention keeps the last two
	// events, so both of gone's records are trimmed.
	r1 := startCache(t, newCache, opts, cp)
	rec := newRecorder()
	addHandler(t, ctx, r1.c, &corev1.ConfigMap{}, rec)
	rec.waitFor(t, "gone's add", hasAll("add gone labels=map[v:1] data=map[k:1]"))
	cm, err := kube.CoreV1().ConfigMaps(ns).Get(ctx, "gone", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	cm.Labels["v"], cm.Data["k"] = "2", "2"
	cm.Annotations = map[string]string{"note": "the last state"}
	last, err := kube.CoreV1().ConfigMaps(ns).Update(ctx, cm, metav1.UpdateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var want []string
	for i := range 3 {
		createCM(t, kube, ns, fmt.Sprintf("other%d", i), nil, nil)
		want = append(want, fmt.Sprintf("add other%d labels=map[] data=map[]", i))
	}
	rec.waitFor(t, "the update and the other adds", hasAll(append(want,
		"update gone labels=map[v:1] data=map[k:1] -> gone labels=map[v:2] data=map[k:2]")...))
	waitOffsets(t, dir, "gone's records trimmed", func(first, head uint64) bool { return head >= 5 && first > 2 })
	r1.stop()

	// Deleted while no cache runs; etcd compacted past the file's
	// resourceVersion, so the next process's resume answers 410.
	deleteCM(t, ctx, kube, ns, "gone")
	if _, err := cp.Compact(ctx); err != nil {
		t.Fatal(err)
	}

	// Second process: the apiserver down until the handler has had the
	// replay from disk (gone among it), so that the relist's DELETED comes
	// after the replay, as an event.
	r2 := startWhileDown(t, newCache, opts, cp)
	defer r2.stop()
	rec2 := newRecorder()
	deleted := make(chan any, 10)
	addHandler(t, ctx, r2.c, &corev1.ConfigMap{}, rec2, crcache.BlockUntilSynced(false))
	reg := addHandler(t, ctx, r2.c, &corev1.ConfigMap{}, toolscache.ResourceEventHandlerFuncs{DeleteFunc: func(o any) { deleted <- o }}, crcache.BlockUntilSynced(false))
	rec2.waitFor(t, "the replay from disk", hasAll(append(want, "add gone labels=map[v:2] data=map[k:2]")...))
	if err := cp.StartAPIServer(ctx); err != nil {
		t.Fatal(err)
	}
	rec2.waitFor(t, "the relist's delete", hasAll("delete unknown(gone labels=map[v:2] data=map[k:2])"))
	d := relistDelete(t, ctx, deleted, "the second handler got no delete")
	obj, ok := d.Obj.(*corev1.ConfigMap)
	if !ok || d.Key != ns+"/gone" {
		t.Fatalf("DeletedFinalStateUnknown{Key: %q, Obj: %T}; want key %s/gone and a *ConfigMap", d.Key, d.Obj, ns)
	}
	cmp := obj.DeepCopy()
	cmp.TypeMeta = metav1.TypeMeta{}
	if !equality.Semantic.DeepEqual(cmp, last) {
		t.Errorf("DeletedFinalStateUnknown.Obj = %+v\nwant the last object served %+v", cmp, last)
	}
	if !toolscache.WaitForCacheSync(ctx.Done(), reg.HasSynced) {
		t.Fatal("handler never synced")
	}
	select {
	case o := <-deleted:
		t.Errorf("a second OnDelete: %#v", o)
	default:
	}
}

// TestCache_SecretRelistDeleteSealed: a Secret's relist-inferred delete
// after its records were trimmed gives DeletedFinalStateUnknown with the
// Secret's last data, and the DELETED that carries it is stored sealed: no
// file of the cache's directory holds the value or its base64.
func TestCache_SecretRelistDeleteSealed(t *testing.T) {
	cp, kube, ns := setup(t)
	dir := t.TempDir()
	newCache := jcache.NewFunc(jcache.WithRetentionInterval(jcache.Options{Dir: dir, NoSync: true, SecretPayloads: true, KeyFiles: []string{writeKeyFile(t)},
		Retention: &journal.Retention{MaxEvents: 1}, Loop: reconcile.Options{MaxBackoff: 300 * time.Millisecond}}, 20*time.Millisecond))
	opts := crcache.Options{Scheme: scheme.Scheme, Mapper: secretMapper()}
	const value, other = "jdelete-last-value-4e91a7", "jdelete-other-value-0b3c52"
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	for name, v := range map[string]string{"s": value, "t": other} {
		sec := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Data: map[string][]byte{"v": []byte(v)}}
		if _, err := kube.CoreV1().Secrets(ns).Create(ctx, sec, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	r1 := startCache(t, newCache, opts, cp)
	rec := newRecorder()
	addHandler(t, ctx, r1.c, &corev1.Secret{}, secretEvents(rec))
	rec.waitFor(t, "the adds", hasAll("add "+value, "add "+other))
	// The list journaled in key order, s before t: retention keeps the
	// last event only, so s's record is trimmed (its object kept sealed
	// in the objects bucket).
	waitOffsets(t, dir, "s's record trimmed", func(first, head uint64) bool { return head >= 2 && first == head })
	r1.stop()
	if err := kube.CoreV1().Secrets(ns).Delete(ctx, "s", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := cp.Compact(ctx); err != nil {
		t.Fatal(err)
	}
	r2 := startWhileDown(t, newCache, opts, cp)
	defer r2.stop()
	deleted := make(chan any, 10)
	rec2 := newRecorder()
	h := secretEvents(rec2)
	h.DeleteFunc = func(o any) { deleted <- o }
	addHandler(t, ctx, r2.c, &corev1.Secret{}, h, crcache.BlockUntilSynced(false))
	rec2.waitFor(t, "the replay from disk", hasAll("add "+value, "add "+other))
	if err := cp.StartAPIServer(ctx); err != nil {
		t.Fatal(err)
	}
	d := relistDelete(t, ctx, deleted, "no delete after the restart")
	if s, ok := d.Obj.(*corev1.Secret); !ok || s.Name != "s" || string(s.Data["v"]) != value {
		t.Fatalf("DeletedFinalStateUnknown.Obj = %#v; want Secret s with its last data", d.Obj)
	}
	grepDir(t, dir, value, other)
}

// secretMapper maps Secrets without discovery, so that a cache can start
// while the apiserver is down.
func secretMapper() meta.RESTMapper {
	m := meta.NewDefaultRESTMapper(nil)
	m.Add(schema.GroupVersionKind{Version: "v1", Kind: "Secret"}, meta.RESTScopeNamespace)
	return m
}
