package jcache_test

// Three managers in one shard group whose owner resource (ConfigMaps) is
// named in ShardOptions.Owners: each replica's file journals only its
// range, so its reads see only the owners it holds; moves on kill, join
// and leave give no OnDelete, and the new holder reconciles each owner
// that moved. With the ShardedListAndWatch gate on the apiserver filters
// (server mode), with it off the loop does (client mode).

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/watchjournal/watchjournal/internal/testing/controlplane"
	"github.com/watchjournal/watchjournal/jcache"
	"github.com/watchjournal/watchjournal/reconcile"
)

func TestShard_OwnersFilesHoldOnlyTheirRange(t *testing.T) {
	for _, gate := range []bool{true, false} {
		t.Run(fmt.Sprintf("ShardedListAndWatch %v", gate), func(t *testing.T) {
			opts := controlplane.Options{}
			mode := reconcile.ShardClient
			if gate {
				opts.ExtraAPIServerArgs = []string{"--feature-gates=ShardedListAndWatch=true"}
				mode = reconcile.ShardServer
			}
			testOwnersRanged(t, opts, mode)
		})
	}
}

func testOwnersRanged(t *testing.T, cpOpts controlplane.Options, mode reconcile.ShardMode) {
	cp := controlplane.StartT(t, cpOpts)
	kube := kubernetes.NewForConfigOrDie(cp.RESTConfig())
	ns := "jc"
	createNamespace(t, kube, ns)
	const owners = 300
	cfg := func() *jcache.ShardOptions {
		return &jcache.ShardOptions{
			Group: "ranged", Namespace: ns,
			Resources:     []schema.GroupResource{{Resource: "configmaps"}, {Resource: "secrets"}},
			Owners:        []schema.GroupResource{{Resource: "configmaps"}},
			LeaseDuration: 3 * time.Second, RenewInterval: 500 * time.Millisecond,
		}
	}
	dirs := map[string]string{}
	start := func(name string, hooks ...func(jcache.Options) jcache.Options) *shardReplica {
		hooks = append(hooks, func(o jcache.Options) jcache.Options { dirs[name] = o.Dir; return o })
		return startShardReplica(t, cp.RESTConfig(), cfg, name, hooks...)
	}
	rs := []*shardReplica{start("r0"), start("r1", jcache.AbandonShardLease), start("r2")}
	all := slices.Clone(rs)
	defer func() {
		for _, r := range all {
			r.cancel()
		}
	}()
	waitShard(t, "three replicas settle", func() bool { return settled(rs) }, func() string { return describeShards(rs) })
	createCMs(t, kube, ns, owners, func(i int) string { return fmt.Sprintf("owner-%03d", i) }, func(int) string { return "v" })

	// inFiles checks that each replica's file holds exactly the owners it
	// holds: together every owner once.
	var last string
	inFiles := func() bool {
		h := holders(t, kube, ns, rs)
		if len(h) != owners {
			last = fmt.Sprintf("%d owners on the server", len(h))
			return false
		}
		seen := map[string]string{}
		for _, r := range rs {
			keys, sel, m, err := jcache.RangedFile(dirs[r.name])
			if err != nil {
				last = fmt.Sprintf("%s: %v", r.name, err)
				return false
			}
			if m != mode {
				last = fmt.Sprintf("%s: shard mode %q; want %q", r.name, m, mode)
				return false
			}
			if st := r.cache.ShardStatus(); sel != st.Held {
				last = fmt.Sprintf("%s: the file records %.60q; the handlers hold %.60q", r.name, sel, st.Held)
				return false
			}
			for _, k := range keys {
				name, ok := strings.CutPrefix(k, ns+"/owner-")
				if !ok {
					continue
				}
				name = "owner-" + name
				if prev, dup := seen[name]; dup {
					last = fmt.Sprintf("%s in the files of %s and %s", name, prev, r.name)
					return false
				}
				seen[name] = r.name
				if hs := h[name]; len(hs) != 1 || hs[0] != r.name {
					last = fmt.Sprintf("%s in %s's file, held by %v", name, r.name, hs)
					return false
				}
			}
		}
		if len(seen) != owners {
			last = fmt.Sprintf("the files hold %d owners; want %d", len(seen), owners)
			return false
		}
		return true
	}
	// reconciledByHolder checks that every owner held by a replica whose
	// count is above before's was reconciled there since.
	reconciledByHolder := func(before map[string]map[string]int, moved func(owner, holder string) bool) bool {
		for o, hs := range holders(t, kube, ns, rs) {
			if len(hs) != 1 {
				last = fmt.Sprintf("%s held by %v", o, hs)
				return false
			}
			r := rs[slices.IndexFunc(rs, func(r *shardReplica) bool { return r.name == hs[0] })]
			if moved(o, hs[0]) && r.counts()[o] <= before[r.name][o] {
				last = fmt.Sprintf("%s held by %s, not reconciled there (%d reconciles)", o, hs[0], r.counts()[o])
				return false
			}
		}
		return true
	}
	waitShard(t, "every owner in its holder's file alone, reconciled there", func() bool {
		return settled(rs) && inFiles() && reconciledByHolder(map[string]map[string]int{}, func(string, string) bool { return true })
	}, func() string { return last + describeShards(rs) })
	share := logShares(t, kube, ns, rs)

	// Reads of the owner resource see only the range: a List of each
	// replica's cache returns the owners it holds.
	for _, r := range rs {
		var l corev1.ConfigMapList
		if err := r.c.List(context.Background(), &l, client.InNamespace(ns)); err != nil {
			t.Fatal(err)
		}
		n := 0
		for i := range l.Items {
			if strings.HasPrefix(l.Items[i].Name, "owner-") {
				n++
				if !r.cache.Holds(&l.Items[i]) {
					t.Errorf("%s lists %s, which it does not hold", r.name, l.Items[i].Name)
				}
			}
		}
		if n != share[r.name] {
			t.Errorf("%s lists %d owners; holds %d", r.name, n, share[r.name])
		}
	}

	// Readiness through the moves: a replica whose owner file moves to
	// another range stays ready, and its informer synced, while it lists
	// the part that entered.
	var unready []string
	var umu sync.Mutex
	watchReady := func(live []*shardReplica) (stop func()) {
		ctx, cancel := context.WithCancel(context.Background())
		var wg sync.WaitGroup
		for _, r := range live {
			check := jcache.ReadyzCheck(r.cache, 0, &corev1.ConfigMap{})
			inf := getInformer(t, ctx, r.cache, &corev1.ConfigMap{})
			wg.Go(func() {
				for ctx.Err() == nil {
					err := check(nil)
					if err == nil && !inf.HasSynced() {
						err = errors.New("the informer has not synced")
					}
					if err != nil && ctx.Err() == nil && !r.stopped.Load() {
						umu.Lock()
						unready = append(unready, r.name+": "+err.Error())
						umu.Unlock()
					}
					time.Sleep(5 * time.Millisecond)
				}
			})
		}
		return func() { cancel(); wg.Wait() }
	}
	change := func(why string, do func() []*shardReplica) {
		t.Helper()
		stopReady := watchReady(rs[:len(rs):len(rs)])
		before := holders(t, kube, ns, rs)
		counts := map[string]map[string]int{}
		for _, r := range rs {
			counts[r.name] = r.counts()
		}
		begin := time.Now()
		rs = do()
		waitShard(t, why, func() bool {
			return settled(rs) && inFiles() && reconciledByHolder(counts, func(o, holder string) bool { return before[o][0] != holder })
		}, func() string { return last + describeShards(rs) })
		stopReady()
		t.Logf("%s: %d owners moved, each in its new holder's file alone and reconciled there within %v", why, movedOwners(t, kube, ns, rs, before), time.Since(begin).Round(100*time.Millisecond))
	}
	killJoinLeave(t, rs, func(name string) *shardReplica {
		r := start(name)
		all = append(all, r)
		return r
	}, change)

	// A killed or stopped replica is not watched after its stop; the
	// others were ready throughout.
	umu.Lock()
	if len(unready) > 0 {
		t.Errorf("not ready during a move %d times, first: %v", len(unready), unready[:min(3, len(unready))])
	}
	umu.Unlock()

	// No owner was deleted: no handler got OnDelete, no reconcile found
	// its owner missing (a range is handed to the handlers only once the
	// file has listed it), and no replica reconciled an owner it did not
	// hold.
	noOwnerDeleted(t, all)
}

// A handler still delivering events under its old range when the file's
// range shrinks (it is slow: here blocked in OnUpdate) reads the keys
// that left as DELETED, reason moved, under a range that holds them: it
// gets no OnDelete for them, since they only moved.
func TestShard_MovedOutIsNoDeleteForASlowHandler(t *testing.T) {
	cp, kube, ns := setup(t)
	cfg := func() *jcache.ShardOptions {
		return &jcache.ShardOptions{
			Group: "slow", Namespace: ns,
			Resources:     []schema.GroupResource{{Resource: "configmaps"}},
			Owners:        []schema.GroupResource{{Resource: "configmaps"}},
			LeaseDuration: 3 * time.Second, RenewInterval: 500 * time.Millisecond,
		}
	}
	dirs := map[string]string{}
	start := func(name string) *shardReplica {
		return startShardReplica(t, cp.RESTConfig(), cfg, name, func(o jcache.Options) jcache.Options { dirs[name] = o.Dir; return o })
	}
	r0 := start("r0")
	defer r0.cancel()
	const owners = 60
	createCMs(t, kube, ns, owners, func(i int) string { return fmt.Sprintf("owner-%03d", i) }, func(int) string { return "v" })
	createCM(t, kube, ns, "blocker", nil, nil)
	ownerKeys := func(dir string) int {
		keys, _, _, err := jcache.RangedFile(dir)
		if err != nil {
			return -1
		}
		n := 0
		for _, k := range keys {
			if strings.HasPrefix(k, ns+"/owner-") {
				n++
			}
		}
		return n
	}
	waitShard(t, "r0 alone holds every owner", func() bool { return settled([]*shardReplica{r0}) && ownerKeys(dirs["r0"]) == owners },
		func() string {
			return fmt.Sprintf("%d owners in r0's file", ownerKeys(dirs["r0"])) + describeShards([]*shardReplica{r0})
		})

	inf := getInformer(t, context.Background(), r0.cache, &corev1.ConfigMap{})
	blocked, held := make(chan struct{}), newHold()
	defer held.release() // before r0's stop: the blocked handler returns
	var mu sync.Mutex
	var deletes []string
	reg, err := inf.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
		UpdateFunc: func(_, obj any) {
			if obj.(client.Object).GetName() == "blocker" {
				close(blocked)
				held.wait()
			}
		},
		DeleteFunc: func(obj any) {
			if d, ok := obj.(toolscache.DeletedFinalStateUnknown); ok {
				obj = d.Obj
			}
			mu.Lock()
			deletes = append(deletes, obj.(client.Object).GetName())
			mu.Unlock()
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	waitShard(t, "the handler replayed", reg.HasSynced, func() string { return "not synced" })
	cm, err := kube.CoreV1().ConfigMaps(ns).Get(context.Background(), "blocker", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	cm.Data = map[string]string{"k": "v2"}
	if _, err := kube.CoreV1().ConfigMaps(ns).Update(context.Background(), cm, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	select {
	case <-blocked:
	case <-time.After(time.Minute):
		t.Fatal("the handler got no update of blocker")
	}
	// r1 joins: r0's file gives up part of its range while the handler
	// is blocked.
	r1 := start("r1")
	defer r1.cancel()
	waitShard(t, "r0's file gives keys up", func() bool { n := ownerKeys(dirs["r0"]); return n >= 0 && n < owners },
		func() string {
			return fmt.Sprintf("%d owners in r0's file", ownerKeys(dirs["r0"])) + describeShards([]*shardReplica{r0, r1})
		})
	held.release()
	rs := []*shardReplica{r0, r1}
	waitShard(t, "two replicas settle, each owner in one file", func() bool {
		return settled(rs) && ownerKeys(dirs["r0"])+ownerKeys(dirs["r1"]) == owners
	}, func() string {
		return fmt.Sprintf("owners in files: r0 %d, r1 %d", ownerKeys(dirs["r0"]), ownerKeys(dirs["r1"])) + describeShards(rs)
	})
	mu.Lock()
	defer mu.Unlock()
	if len(deletes) > 0 {
		t.Errorf("the slow handler got OnDelete for %v; want none (they moved to r1)", deletes)
	}
	for _, r := range rs {
		r.mu.Lock()
		if len(r.deletes) > 0 {
			t.Errorf("%s: handlers got OnDelete for %v; want none", r.name, r.deletes)
		}
		r.mu.Unlock()
	}
}

// A replica restarted on its directory opens its owner file at the range
// it records and moves on from there: owners deleted while it was down
// were given as deletes by the replica that held them then, not again by
// the one that comes back; owners that move back to it are no delete on
// the other; and its file again holds exactly its range.
func TestShard_OwnersFileAcrossRestart(t *testing.T) {
	cp, kube, ns := setup(t)
	cfg := func() *jcache.ShardOptions {
		return &jcache.ShardOptions{
			Group: "restart", Namespace: ns,
			Resources:     []schema.GroupResource{{Resource: "configmaps"}},
			Owners:        []schema.GroupResource{{Resource: "configmaps"}},
			LeaseDuration: 3 * time.Second, RenewInterval: 500 * time.Millisecond,
		}
	}
	dirs := map[string]string{"r0": t.TempDir(), "r1": t.TempDir()}
	start := func(name string) *shardReplica {
		return startShardReplica(t, cp.RESTConfig(), cfg, name, func(o jcache.Options) jcache.Options { o.Dir = dirs[name]; return o })
	}
	const owners = 80
	createCMs(t, kube, ns, owners, func(i int) string { return fmt.Sprintf("owner-%03d", i) }, func(int) string { return "v" })
	fileOwners := func(r *shardReplica) map[string]bool {
		keys, _, _, err := jcache.RangedFile(dirs[r.name])
		if err != nil {
			return nil
		}
		out := map[string]bool{}
		for _, k := range keys {
			if n, ok := strings.CutPrefix(k, ns+"/"); ok && strings.HasPrefix(n, "owner-") {
				out[n] = true
			}
		}
		return out
	}
	// exact checks that the files of rs hold the server's owners, each in
	// its holder's file alone.
	var last string
	exact := func(rs []*shardReplica) bool {
		if !settled(rs) {
			last = "not settled"
			return false
		}
		h := holders(t, kube, ns, rs)
		n := 0
		for _, r := range rs {
			fo := fileOwners(r)
			for o := range fo {
				if hs := h[o]; len(hs) != 1 || hs[0] != r.name {
					last = fmt.Sprintf("%s in %s's file, held by %v", o, r.name, hs)
					return false
				}
			}
			n += len(fo)
		}
		if n != len(h) {
			last = fmt.Sprintf("the files hold %d owners; the server %d", n, len(h))
			return false
		}
		return true
	}
	r0, r1 := start("r0"), start("r1")
	defer func() { r0.cancel(); r1.cancel() }()
	rs := []*shardReplica{r0, r1}
	waitShard(t, "two replicas, each owner in its holder's file", func() bool { return exact(rs) }, func() string { return last + describeShards(rs) })
	held := fileOwners(r0)

	// r0 stops; r1 takes every owner; some of r0's owners are deleted
	// meanwhile.
	r0.stop(t)
	waitShard(t, "r1 alone holds every owner", func() bool { return exact([]*shardReplica{r1}) }, func() string { return last + describeShards([]*shardReplica{r1}) })
	var deleted []string
	for o := range held {
		if len(deleted) == 5 {
			break
		}
		if err := kube.CoreV1().ConfigMaps(ns).Delete(context.Background(), o, metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		deleted = append(deleted, o)
	}
	slices.Sort(deleted)

	deletes := func(r *shardReplica) []string {
		r.mu.Lock()
		defer r.mu.Unlock()
		return slices.Compact(slices.Sorted(slices.Values(r.deletes)))
	}
	waitShard(t, "r1, which holds them, gets the deletes", func() bool { return slices.Equal(deletes(r1), deleted) },
		func() string { return fmt.Sprintf("r1's deletes %v; want %v", deletes(r1), deleted) })

	// r0 comes back on its directory: its file opens at the range it
	// records, and it holds its share again.
	r0 = start("r0")
	rs = []*shardReplica{r0, r1}
	waitShard(t, "r0 back: each owner in its holder's file", func() bool { return exact(rs) }, func() string { return last + describeShards(rs) })
	if got := deletes(r0); len(got) > 0 {
		t.Errorf("r0's handlers got OnDelete for %v; want none (r1 held those owners when they were deleted, and was given their deletes)", got)
	}
	if got := deletes(r1); !slices.Equal(got, deleted) {
		t.Errorf("r1's handlers got OnDelete for %v; want %v (the owners moved back to r0 only moved)", got, deleted)
	}
	if n := len(fileOwners(r0)); n == 0 {
		t.Errorf("r0's file holds no owner after its restart")
	}
}
