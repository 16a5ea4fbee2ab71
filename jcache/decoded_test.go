package jcache

import (
	"encoding/json"
	"fmt"
	"sync"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	toolscache "k8s.io/client-go/tools/cache"

	"github.com/watchjournal/watchjournal/journal"
)

// pointerHandler records the objects it is given as OnAdd, by name.
type pointerHandler struct {
	mu   sync.Mutex
	adds map[string]*corev1.ConfigMap
}

func (h *pointerHandler) OnAdd(o any, _ bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	cm := o.(*corev1.ConfigMap)
	h.adds[cm.Name] = cm
}
func (h *pointerHandler) OnUpdate(_, _ any) {}
func (h *pointerHandler) OnDelete(any)      {}

// TestDecoded_IndexDecodeHandedToHandler: with an index on disk and a
// handler registered, the object the index function decoded when the
// writer stored an event is the object the handler is given for that
// event (one decode, not two); once the handler reached the head nothing
// is held; without a handler nothing is kept.
func TestDecoded_IndexDecodeHandedToHandler(t *testing.T) {
	j, _ := replayFile(t, 10)
	h := &pointerHandler{adds: map[string]*corev1.ConfigMap{}}
	r := replayRegistration(j, &recorder{}, 0)
	inf := r.inf
	var mu sync.Mutex
	indexed := map[string]*corev1.ConfigMap{}
	inf.indexOnDisk(toolscache.Indexers{"name": func(o any) ([]string, error) {
		cm := o.(*corev1.ConfigMap)
		mu.Lock()
		indexed[cm.Name] = cm
		mu.Unlock()
		return []string{cm.Name}, nil
	}})
	// The reindex registering the index starts calls the function on its
	// own goroutine: let it finish before the test reads what it wrote.
	if _, err := inf.f.reindexes.wait(t.Context()); err != nil {
		t.Fatal(err)
	}
	if n := len(inf.decoded.m); n != 0 {
		t.Fatalf("%d objects kept with no handler registered", n)
	}
	r.h = h
	inf.handlers[r] = struct{}{}
	head, err := j.Head()
	if err != nil {
		t.Fatal(err)
	}
	r.pos.Store(head)

	err = j.Writer().Update(func(tx *journal.Tx) error {
		for i := range 5 {
			cm := &corev1.ConfigMap{}
			cm.Kind, cm.APIVersion = "ConfigMap", "v1"
			cm.Namespace, cm.Name = "ns", fmt.Sprintf("new%d", i)
			cm.UID, cm.ResourceVersion = types.UID(fmt.Sprint("n", i)), fmt.Sprint(100+i)
			b, err := json.Marshal(cm)
			if err != nil {
				return err
			}
			if _, err := tx.Append(&journal.Event{Type: journal.Added, Key: "ns/" + cm.Name, UID: string(cm.UID), ResourceVersion: cm.ResourceVersion, Object: b, Origin: journal.OriginWatch}); err != nil {
				return err
			}
		}
		return tx.SetResourceVersion("104")
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := r.deliver(t.Context(), 0, func(journal.Event) bool { return false }); err != nil {
		t.Fatal(err)
	}
	for i := range 5 {
		name := fmt.Sprintf("new%d", i)
		got, want := h.adds[name], indexed[name]
		if got == nil || want == nil {
			t.Fatalf("%s: handler got %v, index function got %v", name, got, want)
		}
		if got != want {
			t.Errorf("%s: the handler's object was decoded again, not the index function's", name)
		}
	}
	if n := len(inf.decoded.m); n != 0 {
		t.Errorf("%d objects still held after the handler reached the head", n)
	}
}

// TestDecoded_Bounded: at most max objects are held, the oldest
// dropped first; an object is taken once, and only for equal bytes.
func TestDecoded_Bounded(t *testing.T) {
	d := decodedObjects{max: 3}
	objs := make([]*corev1.ConfigMap, 5)
	for i := range objs {
		objs[i] = &corev1.ConfigMap{}
		d.put([]byte(fmt.Sprint("object ", i)), objs[i])
	}
	if len(d.m) != 3 {
		t.Fatalf("%d held, want 3", len(d.m))
	}
	if o := d.take([]byte("object 0")); o != nil {
		t.Error("the oldest object was not dropped")
	}
	if o := d.take([]byte("object 4")); o != objs[4] {
		t.Errorf("took %v, want object 4", o)
	}
	if o := d.take([]byte("object 4")); o != nil {
		t.Error("an object was taken twice")
	}
	if o := d.take([]byte("object 9")); o != nil {
		t.Error("an object was taken for other bytes")
	}
}
