package adapt_test

import (
	"context"
	"net/http"
	"path/filepath"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	watchtools "k8s.io/client-go/tools/watch"

	"github.com/watchjournal/watchjournal/internal/testing/controlplane"
	"github.com/watchjournal/watchjournal/journal/adapt"
)

// next reads the next event from a watch.Interface the way code written for
// RetryWatcher does: range over ResultChan. ok is false when it closed.
func next(t *testing.T, w watch.Interface) (watch.Event, bool) {
	t.Helper()
	select {
	case ev, ok := <-w.ResultChan():
		return ev, ok
	case <-time.After(60 * time.Second):
		t.Fatal("no event within 60s")
		return watch.Event{}, false
	}
}

func name(ev watch.Event) string {
	switch o := ev.Object.(type) {
	case *unstructured.Unstructured:
		return o.GetName()
	case *corev1.ConfigMap:
		return o.Name
	case *metav1.Status:
		return string(o.Reason) + "/" + http.StatusText(int(o.Code))
	}
	return "?"
}

// The adapter is driven exactly as RetryWatcher is, against the real
// apiserver, through a 410 Gone that RetryWatcher itself cannot survive.
func TestWatcher_SurvivesGoneWhereRetryWatcherStops(t *testing.T) {
	ns := "adapt"
	cp, ctx, kube := startNamespace(t, ns, 2*time.Minute)
	cms := kube.CoreV1().ConfigMaps(ns)
	createConfigMaps(t, ctx, cms, "a", "b")
	proxy, err := controlplane.NewProxy(cp.APIServerAddr())
	if err != nil {
		t.Fatal(err)
	}
	defer proxy.Close()
	proxied := kubernetes.NewForConfigOrDie(cp.ProxiedRESTConfig(proxy))

	// client-go's RetryWatcher from the current resourceVersion.
	list, err := cms.List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	rw, err := watchtools.NewRetryWatcherWithContext(ctx, list.ResourceVersion, &cache.ListWatch{
		WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
			return proxied.CoreV1().ConfigMaps(ns).Watch(ctx, o)
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	defer rw.Stop()

	// watchjournal: the writer, and the adapter from the head on.
	j, stopLoop := runLoop(t, cp.ProxiedRESTConfig(proxy), filepath.Join(t.TempDir(), "j.db"), configMaps(ns), synced)
	defer stopLoop()
	aw, err := adapt.NewWatcher(j, adapt.FromNow, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer aw.Stop()

	// A live change reaches both.
	a, _ := cms.Get(ctx, "a", metav1.GetOptions{})
	a.Data = map[string]string{"v": "1"}
	if _, err := cms.Update(ctx, a, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	for _, w := range []watch.Interface{rw, aw} {
		if ev, ok := next(t, w); !ok || ev.Type != watch.Modified || name(ev) != "a" {
			t.Fatalf("%T: first event = %v %s, open %v; want MODIFIED a", w, ev.Type, name(ev), ok)
		}
	}

	// Disconnected: b is deleted, etcd compacted past both watchers' RV.
	proxy.Cut()
	deleteBCompacted(t, ctx, cp, cms)
	proxy.Heal()

	// RetryWatcher: an ERROR with the 410, then its channel closes.
	ev, ok := next(t, rw)
	if !ok || ev.Type != watch.Error || name(ev) != "Expired/Gone" {
		t.Fatalf("RetryWatcher after compaction: %v %s (open %v); want ERROR Expired/Gone", ev.Type, name(ev), ok)
	}
	if _, ok := next(t, rw); ok {
		t.Fatalf("RetryWatcher delivered more after the 410; want its channel closed")
	}
	// The adapter: the delete that happened while away, then live again.
	ev, ok = next(t, aw)
	if !ok || ev.Type != watch.Deleted || name(ev) != "b" {
		t.Fatalf("adapter after compaction: %v %s (open %v); want DELETED b", ev.Type, name(ev), ok)
	}
	ev, ok = next(t, aw)
	if !ok || ev.Type != watch.Added || name(ev) != "c" {
		t.Fatalf("adapter after compaction: %v %s (open %v); want ADDED c", ev.Type, name(ev), ok)
	}
	a, _ = cms.Get(ctx, "a", metav1.GetOptions{})
	a.Data = map[string]string{"v": "2"}
	if _, err := cms.Update(ctx, a, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	ev, ok = next(t, aw)
	if !ok || ev.Type != watch.Modified || name(ev) != "a" {
		t.Fatalf("adapter after the relist: %v %s (open %v); want MODIFIED a", ev.Type, name(ev), ok)
	}
	aw.Stop()
	<-aw.Done()
}
