package adapt_test

import (
	"sync/atomic"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/watchjournal/watchjournal/journal/adapt"
	jcache "github.com/watchjournal/watchjournal/journal/cache"
)

// One decoder, one name: Options.Decode takes journal/cache's
// DecodeFunc[runtime.Object], and a Watcher decodes stored objects with it.
func TestOptions_Decode_TakesCacheDecodeFunc(t *testing.T) {
	j, cleanup := demoJournal()
	defer cleanup()
	var calls atomic.Int64 // the watcher's goroutine decodes
	var decode jcache.DecodeFunc[runtime.Object] = func(b []byte) (runtime.Object, error) {
		calls.Add(1)
		u, err := jcache.Unstructured(b)
		if err != nil {
			return nil, err
		}
		return u, nil
	}
	w, err := adapt.NewWatcher(j, 1, &adapt.Options{Decode: decode})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	ev := <-w.ResultChan()
	u, ok := ev.Object.(*unstructured.Unstructured)
	if ev.Type != watch.Added || !ok || u.GetResourceVersion() != "10" {
		t.Fatalf("first event = %s %T; want ADDED *unstructured.Unstructured at resourceVersion 10", ev.Type, ev.Object)
	}
	if calls.Load() == 0 {
		t.Error("Decode was not called; want the given DecodeFunc to decode the stored object")
	}
}
