package jcache_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/rest"
	crcache "sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/watchjournal/watchjournal/internal/testing/controlplane"
	"github.com/watchjournal/watchjournal/jcache"
	"github.com/watchjournal/watchjournal/reconcile"
)

// startIndexedAt is startIndexed with the cache's rest.Config given (a
// proxied one).
func startIndexedAt(t *testing.T, newCache crcache.NewCacheFunc, cfg *rest.Config, opts crcache.Options, calls *atomic.Int64) *running {
	t.Helper()
	r := startWith(t, newCache, cfg, opts, func(ctx context.Context, c crcache.Cache) error {
		return c.IndexField(ctx, &corev1.ConfigMap{}, "data.k", func(o client.Object) []string {
			calls.Add(1)
			return []string{o.(*corev1.ConfigMap).Data["k"]}
		})
	})
	r.reindexed = reindexed(t, "")
	return r
}

// TestCache_IndexAfterLive410RelistAndRestart: a running cache loses its
// connection (a proxy cut) while objects change and etcd is compacted;
// healed, its watch resumes into 410 Gone and it relists in the same
// process (its handler gets the relist's update, add and inferred delete:
// DeletedFinalStateUnknown with the last object). An index lookup then
// answers the relisted values from the index on disk; after a plain
// restart (nothing changed) the lookups answer the same from the file,
// the index not built again.
func TestCache_IndexAfterLive410RelistAndRestart(t *testing.T) {
	cp, kube, ns := setup(t)
	p, err := controlplane.NewProxy(cp.APIServerAddr())
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	newCache := jcache.NewFunc(jcache.Options{Dir: t.TempDir(), NoSync: true,
		Loop: reconcile.Options{MinBackoff: 50 * time.Millisecond, MaxBackoff: 300 * time.Millisecond}})
	opts := crcache.Options{Mapper: staticMapper()}
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	createIndexed(t, kube, ns)

	var calls atomic.Int64
	r1 := startIndexedAt(t, newCache, cp.ProxiedRESTConfig(p), opts, &calls)
	rec := newRecorder()
	addHandler(t, ctx, r1.c, &corev1.ConfigMap{}, rec)
	rec.waitFor(t, "the adds", hasAll("add a labels=map[] data=map[k:1]", "add b labels=map[] data=map[k:b]", "add c labels=map[] data=map[k:1]"))
	wantByIndex(t, r1.c, ns, "1", "a", "c")
	wantByIndex(t, r1.c, ns, "b", "b")

	// Cut off: the changes and the compaction happen while the cache's
	// watch cannot reach the server.
	p.Cut()
	changeIndexedAndCompact(t, ctx, cp, kube, ns)
	p.Heal()
	// A watch would have delivered b's DELETED with its object; the
	// DeletedFinalStateUnknown says a relist found it.
	rec.waitFor(t, "the live relist after 410 Gone", hasAll(
		"update a labels=map[] data=map[k:1] -> a labels=map[] data=map[k:3]",
		"delete unknown(b labels=map[] data=map[k:b])",
		"add d labels=map[] data=map[k:1]"))
	wantByIndex(t, r1.c, ns, "1", "c", "d")
	wantByIndex(t, r1.c, ns, "3", "a")
	wantByIndex(t, r1.c, ns, "b")
	r1.stop()

	// A plain restart: the index is the file's, not built again (nothing
	// changed: the function is called once per object by the reindex,
	// which rewrites nothing), and answers the same.
	calls.Store(0)
	r2 := startIndexedAt(t, newCache, cp.RESTConfig(), opts, &calls)
	defer r2.stop()
	getInformer(t, ctx, r2.c, &corev1.ConfigMap{})
	wantByIndex(t, r2.c, ns, "1", "c", "d")
	wantByIndex(t, r2.c, ns, "3", "a")
	wantByIndex(t, r2.c, ns, "b")
	if n, st := calls.Load(), r2.reindexed; n != int64(st.Keys) || st.Rewritten != 0 {
		t.Errorf("index function called %d times by a restart with nothing changed, reindex %+v; want one call per key, nothing rewritten", n, st)
	}
}
