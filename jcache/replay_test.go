package jcache_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	toolscache "k8s.io/client-go/tools/cache"
	crcache "sigs.k8s.io/controller-runtime/pkg/cache"

	"github.com/watchjournal/watchjournal/jcache"
)

// view applies a handler's calls to a map key → data["v"], and records
// every call that contradicts it: an add of a key it holds, an update or
// delete of one it does not, an update whose old object is not what it
// holds.
type view struct {
	mu      sync.Mutex
	m       map[string]string
	bad     []string
	changed chan struct{}
}

func (v *view) apply(f func()) {
	v.mu.Lock()
	f()
	close(v.changed)
	v.changed = make(chan struct{})
	v.mu.Unlock()
}

func key(o any) (string, string) {
	if d, ok := o.(toolscache.DeletedFinalStateUnknown); ok {
		o = d.Obj
	}
	cm := o.(*corev1.ConfigMap)
	return cm.Namespace + "/" + cm.Name, cm.Data["v"]
}

func (v *view) OnAdd(o any, _ bool) {
	v.apply(func() {
		k, d := key(o)
		if _, ok := v.m[k]; ok {
			v.bad = append(v.bad, "add of a key held: "+k)
		}
		v.m[k] = d
	})
}

func (v *view) OnUpdate(old, o any) {
	v.apply(func() {
		k, d := key(o)
		_, od := key(old)
		if have, ok := v.m[k]; !ok || have != od {
			v.bad = append(v.bad, fmt.Sprintf("update of %s from %q, held %q (%v)", k, od, have, ok))
		}
		v.m[k] = d
	})
}

func (v *view) OnDelete(o any) {
	v.apply(func() {
		k, _ := key(o)
		if _, ok := v.m[k]; !ok {
			v.bad = append(v.bad, "delete of a key not held: "+k)
		}
		delete(v.m, k)
	})
}

// TestCache_ReplayInChunksWhileWriting: a handler added while objects
// change, replayed in chunks of 3 objects, sees a consistent sequence
// (no add of a key it holds, every update's old object the one it holds)
// and ends with the server's state.
func TestCache_ReplayInChunksWhileWriting(t *testing.T) {
	cp, kube, ns := setup(t)
	const n = 30
	for i := range n {
		createCM(t, kube, ns, fmt.Sprintf("cm%02d", i), nil, map[string]string{"v": "0"})
	}
	r := startCache(t, jcache.NewFunc(jcache.WithReplayChunk(jcache.Options{Dir: t.TempDir(), NoSync: true}, 3)), crcache.Options{}, cp)
	defer r.stop()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	inf := getInformer(t, ctx, r.c, &corev1.ConfigMap{})
	// Writes run while handlers are added and replayed.
	done := make(chan struct{})
	want := map[string]string{}
	go func() {
		defer close(done)
		for round := 1; round <= 3; round++ {
			for i := range n {
				name := fmt.Sprintf("cm%02d", i)
				switch {
				case round == 3 && i%5 == 0:
					_ = kube.CoreV1().ConfigMaps(ns).Delete(ctx, name, metav1.DeleteOptions{})
				default:
					cm, err := kube.CoreV1().ConfigMaps(ns).Get(ctx, name, metav1.GetOptions{})
					if err != nil {
						continue
					}
					cm.Data["v"] = fmt.Sprint(round)
					_, _ = kube.CoreV1().ConfigMaps(ns).Update(ctx, cm, metav1.UpdateOptions{})
				}
			}
		}
	}()
	var views []*view
	for range 4 {
		v := &view{m: map[string]string{}, changed: make(chan struct{})}
		if _, err := inf.AddEventHandler(v); err != nil {
			t.Fatal(err)
		}
		views = append(views, v)
	}
	<-done
	l, err := kube.CoreV1().ConfigMaps(metav1.NamespaceAll).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, cm := range l.Items {
		want[cm.Namespace+"/"+cm.Name] = cm.Data["v"]
	}
	for i, v := range views {
		for {
			v.mu.Lock()
			got, ch, bad := fmt.Sprint(v.m), v.changed, append([]string(nil), v.bad...)
			v.mu.Unlock()
			if len(bad) > 0 {
				t.Fatalf("handler %d: %q", i, bad)
			}
			if got == fmt.Sprint(want) {
				break
			}
			select {
			case <-ch:
			case <-ctx.Done():
				t.Fatalf("handler %d: view %s, want %s", i, got, fmt.Sprint(want))
			}
		}
	}
}
