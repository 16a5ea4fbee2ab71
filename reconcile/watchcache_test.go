package reconcile_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/watchjournal/watchjournal/internal/testing/controlplane"
	"github.com/watchjournal/watchjournal/reconcile"
)

// watchCachePlane is a second control plane whose apiserver runs with its
// watch cache, as production ones do: bookmarks, and a 410 from the cache
// after a restart.
var watchCachePlane = &otherPlane{prefix: "wj-cp-wc-", opts: controlplane.Options{WatchCache: true}}

// watchCacheEnv is newEnv on watchCachePlane.
func watchCacheEnv(t *testing.T) *env {
	t.Helper()
	return watchCachePlane.env(t)
}

// Scenario S02, uninjected: kube-apiserver (watch cache on) restarts while
// we are cut off and e is created; the resume is answered from the new
// cache, with a 410 or with the event; either way ADDED e lands once.
func TestLoop_WatchCache_APIServerRestart(t *testing.T) {
	e := watchCacheEnv(t)
	e.create("a")
	h := e.startListed(nil, testOptions(t))
	e.proxy.Cut()
	e.create("e")
	if err := e.cp.RestartAPIServer(context.Background()); err != nil {
		t.Fatal(err)
	}
	e.proxy.Heal()
	e.waitHead(h + 1)
	w := e.loop.Status().Watches
	e.waitStatus("watching", func(s reconcile.Status) bool { return s.Phase == reconcile.PhaseWatching && s.Watches >= w })
	got, _ := e.eventsFrom(h + 1)
	if len(got) != 1 || (got[0] != "ADDED e watch" && got[0] != "ADDED e relist") {
		t.Fatalf("events after the restart = %q; want ADDED e once", got)
	}
	e.checkIndex(e.j)
}

// Scenario S03: on a quiet resource, bookmarks carry the resourceVersion
// forward while other namespaces change; the journal stores it (never as
// an event), so after compaction a reconnect resumes without a 410.
func TestLoop_WatchCache_BookmarksKeepQuietResourceResumable(t *testing.T) {
	if testing.Short() {
		t.Skip("waits for the apiserver's periodic bookmark (about a minute)")
	}
	e := watchCacheEnv(t)
	a := e.create("a")
	h := e.startListed(nil, testOptions(t))

	// Writes elsewhere move the global resourceVersion on.
	other := fmt.Sprintf("wj-other-%d", time.Now().UnixNano()%1e6)
	ctx := context.Background()
	if _, err := e.kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: other}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 50; i++ {
		if _, err := e.kube.CoreV1().ConfigMaps(other).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprint("f", i)}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	ctx2, cancel := context.WithTimeout(ctx, 3*time.Minute)
	defer cancel()
	if err := e.loop.WaitFor(ctx2, func(s reconcile.Status) bool { return s.ResourceVersion != a.ResourceVersion }); err != nil {
		t.Fatalf("no bookmark moved the resourceVersion within 3 minutes: %v", err)
	}
	if e.head() != h {
		t.Fatalf("a bookmark was journaled: head %d; want %d", e.head(), h)
	}
	rv, _ := e.j.ResourceVersion()
	if rv == a.ResourceVersion {
		t.Fatalf("stored resourceVersion did not move with the bookmark")
	}

	e.proxy.Cut()
	e.compact()
	e.proxy.Heal()
	e.update("a")
	e.waitHead(h + 1)
	e.expectEvents("after reconnect", h+1, []string{"MODIFIED a watch"})
	if st := e.loop.Status(); st.Gone != 0 || st.Lists != 1 {
		t.Errorf("Status = %+v; want no 410 and no relist: the bookmark's resourceVersion was still served", st)
	}
}
