package jcache

import (
	"errors"
	"sync/atomic"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	toolscache "k8s.io/client-go/tools/cache"
)

// TestRead_ParallelDecodeKeepsOrder: a List and a namespace's objects,
// decoded on all cores in batches (1,000 objects, several batches, the
// last partial), come in key order, each the stored object of its key,
// and the read's function is never called from two goroutines at once.
func TestRead_ParallelDecodeKeepsOrder(t *testing.T) {
	j, keys := replayFile(t, 1000)
	inf := replayRegistration(j, &recorder{}, 0).inf
	var got []string
	var in, overlap atomic.Bool
	err := inf.idx.scan("ns/", func(k string, o runtime.Object) error {
		if in.Swap(true) {
			overlap.Store(true)
		}
		defer in.Store(false)
		if cm := o.(*corev1.ConfigMap); "ns/"+cm.Name != k {
			t.Errorf("key %s was given the object of %s/%s", k, cm.Namespace, cm.Name)
		}
		got = append(got, k)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	sameKeys(t, "scan of ns/", got, keys)
	if overlap.Load() {
		t.Error("two calls of the read's function overlapped")
	}
	list := inf.idx.List()
	if len(list) != len(keys) {
		t.Fatalf("List: %d objects, want %d", len(list), len(keys))
	}
	for i, o := range list {
		if k, _ := toolscache.MetaNamespaceKeyFunc(o); k != keys[i] {
			t.Fatalf("List: object %d is %s, want %s", i, k, keys[i])
		}
	}
}

// TestRead_DecodeErrorSurfaces: an object that does not decode (here its
// transform fails) is the read's error, after the objects before it were
// handed over in order and none after it.
func TestRead_DecodeErrorSurfaces(t *testing.T) {
	j, keys := replayFile(t, 1000)
	inf := replayRegistration(j, &recorder{}, 0).inf
	bad := errors.New("this object does not decode")
	inf.onDecode = func(o any) (any, error) {
		if o.(*corev1.ConfigMap).Name == "o000600" {
			return nil, bad
		}
		return o, nil
	}
	var got []string
	err := inf.idx.scan("", func(k string, _ runtime.Object) error { got = append(got, k); return nil })
	if !errors.Is(err, bad) {
		t.Fatalf("scan returned %v, want the decode error", err)
	}
	sameKeys(t, "scan up to the bad object", got, keys[:600])
	if _, err := inf.idx.ByIndex(toolscache.NamespaceIndex, "ns"); !errors.Is(err, bad) {
		t.Fatalf("ByIndex(namespace) returned %v, want the decode error", err)
	}
}

// BenchmarkRead_Namespace: a namespace's 1,000 stored ConfigMaps read
// and decoded as a List of the namespace does (run with -cpu 1,2 for the
// serial decode against the parallel one).
func BenchmarkRead_Namespace(b *testing.B) {
	j, _ := replayFileB(b, 1000)
	inf := replayRegistration(j, &recorder{}, 0).inf
	for b.Loop() {
		if out, err := inf.idx.ByIndex(toolscache.NamespaceIndex, "ns"); err != nil || len(out) != 1000 {
			b.Fatalf("ByIndex = %d objects, %v", len(out), err)
		}
	}
}
