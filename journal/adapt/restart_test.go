package adapt_test

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/cache"

	"github.com/watchjournal/watchjournal/journal"
	"github.com/watchjournal/watchjournal/journal/adapt"
)

// typed decodes through client-go's scheme into *corev1.ConfigMap.
func typed(b []byte) (runtime.Object, error) {
	obj, _, err := scheme.Codecs.UniversalDeserializer().Decode(b, nil, nil)
	return obj, err
}

// A fresh process whose first event is a DELETED inferred by a relist (the
// object was deleted while the process was down and etcd compacted) gets
// that delete from both adapters, with a typed and an unstructured decoder:
// the tombstone is labelled with the kind the file records, not one learnt
// from objects seen earlier in the process ("decode: Object 'Kind' is
// missing" before).
func TestAdapters_FirstEventAfterRestartIsATombstone(t *testing.T) {
	ns := "tomb"
	cp, ctx, kube := startNamespace(t, ns, 3*time.Minute)
	cms := kube.CoreV1().ConfigMaps(ns)
	createConfigMaps(t, ctx, cms, "a", "b")
	path := filepath.Join(t.TempDir(), "j.db")
	res := configMaps(ns)
	consumers := []string{"handle-typed", "handle-unstructured", "watch-typed", "watch-unstructured"}

	// First process: sync, and every consumer has committed everything.
	j, stop := runLoop(t, cp.RESTConfig(), path, res, synced)
	if r, _, _ := j.Resource(); r.Kind != "ConfigMap" || r.APIVersion != "v1" {
		t.Fatalf("recorded resource %+v; want Kind ConfigMap, APIVersion v1 from discovery", r)
	}
	head, _ := j.Head()
	for _, name := range consumers {
		c, err := j.Consumers().Open(name)
		if err != nil {
			t.Fatal(err)
		}
		if err := c.Commit(head); err != nil {
			t.Fatal(err)
		}
	}
	stop()

	// Down: b deleted, c created, etcd compacted past the stored RV.
	deleteBCompacted(t, ctx, cp, cms)

	// Second process: the resume meets a 410, the relist journals the gap.
	j, stop = runLoop(t, cp.RESTConfig(), path, res, synced)
	defer stop()
	if evs, _ := j.Read(head+1, 10); len(evs) == 0 || evs[0].Type != journal.Deleted || evs[0].Key != ns+"/b" || evs[0].Object != nil {
		t.Fatalf("journal after the restart relist: %+v; want a tombstone for %s/b first", evs, ns)
	}

	for _, tc := range []struct {
		name   string
		decode func([]byte) (runtime.Object, error)
		check  func(obj any) error
	}{
		{"typed", typed, func(obj any) error {
			if cm, ok := obj.(*corev1.ConfigMap); !ok || cm.Name != "b" || cm.Namespace != ns || cm.UID == "" {
				return fmt.Errorf("object %T %+v; want *v1.ConfigMap %s/b with its UID", obj, obj, ns)
			}
			return nil
		}},
		{"unstructured", nil, func(obj any) error {
			u, ok := obj.(*unstructured.Unstructured)
			if !ok || u.GetName() != "b" || u.GetKind() != "ConfigMap" || u.GetAPIVersion() != "v1" {
				return fmt.Errorf("object %T %+v; want ConfigMap v1 b", obj, obj)
			}
			return nil
		}},
	} {
		t.Run("Handle/"+tc.name, func(t *testing.T) {
			c, err := j.Consumers().Open("handle-" + tc.name) // a fresh consumer instance, fresh adapter
			if err != nil {
				t.Fatal(err)
			}
			hctx, hcancel := context.WithTimeout(ctx, 30*time.Second)
			defer hcancel()
			var got any
			h := cache.ResourceEventHandlerFuncs{
				AddFunc:    func(obj any) { got = obj; hcancel() },
				UpdateFunc: func(_, obj any) { got = obj; hcancel() },
				DeleteFunc: func(obj any) { got = obj; hcancel() },
			}
			if err := adapt.Handle(hctx, c, h, &adapt.Options{Decode: tc.decode, Batch: 1}); err != nil {
				t.Fatalf("Handle = %v; want nil after the first event", err)
			}
			d, ok := got.(cache.DeletedFinalStateUnknown)
			if !ok || d.Key != ns+"/b" {
				t.Fatalf("first event = %T %+v; want DeletedFinalStateUnknown %s/b", got, got, ns)
			}
			if err := tc.check(d.Obj); err != nil {
				t.Fatal(err)
			}
		})
		t.Run("NewWatcher/"+tc.name, func(t *testing.T) {
			for _, from := range []string{"offset", "consumer"} {
				var w *adapt.Watcher
				var err error
				if from == "offset" {
					w, err = adapt.NewWatcher(j, head+1, &adapt.Options{Decode: tc.decode})
				} else {
					c, cerr := j.Consumers().Open("watch-" + tc.name)
					if cerr != nil {
						t.Fatal(cerr)
					}
					w, err = adapt.WatchConsumer(c, &adapt.Options{Decode: tc.decode})
				}
				if err != nil {
					t.Fatal(err)
				}
				ev, ok := next(t, w)
				w.Stop()
				<-w.Done()
				if !ok || ev.Type != watch.Deleted {
					t.Fatalf("%s: first event %v %s (open %v); want DELETED b", from, ev.Type, name(ev), ok)
				}
				if err := tc.check(ev.Object); err != nil {
					t.Fatalf("%s: %v", from, err)
				}
			}
		})
	}
}
