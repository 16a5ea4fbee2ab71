package jcache_test

// Three managers in one shard group against the real apiserver: owner
// ConfigMaps each owning one child Secret, a controller For(owner).
// Owns(child) on each replica. Each owner is reconciled by the replica
// that holds it and its child's events reach that replica; then one
// replica is killed (its Lease left to expire), one joins (keys move from
// live replicas), one leaves cleanly: every owner whose holder changed is
// reconciled by its new holder, each owner is held by one replica, and no
// handler sees a delete for a key that only moved.

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/watchjournal/watchjournal/jcache"
)

// shardReplica is one manager of the group and what it saw.
type shardReplica struct {
	name    string
	cache   *jcache.Cache
	c       client.Client
	cancel  context.CancelFunc
	done    chan error
	stopped atomic.Bool // stop was called

	mu         sync.Mutex
	reconciled map[string]int // owner name → reconciles that found it held
	notFound   []string       // owners a reconcile did not find (none is deleted)
	notHeld    []string       // owners reconciled while not held
	deletes    []string       // OnDelete the replica's handlers got
}

func (r *shardReplica) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	if !strings.HasPrefix(req.Name, "owner-") {
		return reconcile.Result{}, nil
	}
	var cm corev1.ConfigMap
	if err := r.c.Get(ctx, req.NamespacedName, &cm); err != nil {
		if apierrors.IsNotFound(err) {
			r.mu.Lock()
			r.notFound = append(r.notFound, req.Name)
			r.mu.Unlock()
		}
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	if !r.cache.Holds(&cm) {
		r.mu.Lock()
		r.notHeld = append(r.notHeld, req.Name)
		r.mu.Unlock()
		return reconcile.Result{}, nil
	}
	if err := ensureChild(ctx, r.c, &cm); err != nil {
		return reconcile.Result{}, err
	}
	r.mu.Lock()
	r.reconciled[req.Name]++
	r.mu.Unlock()
	return reconcile.Result{}, nil
}

// counts returns a copy of the reconcile counts.
func (r *shardReplica) counts() map[string]int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return maps.Clone(r.reconciled)
}

// startShardReplica starts a manager whose cache is member name of group.
func startShardReplica(t *testing.T, rc *rest.Config, cfg func() *jcache.ShardOptions, name string, hooks ...func(jcache.Options) jcache.Options) *shardReplica {
	t.Helper()
	so := cfg()
	so.Member = name
	r := &shardReplica{name: name, reconciled: map[string]int{}, done: make(chan error, 1)}
	// Replays, and the reads of a range that enters, in many chunks.
	o := jcache.WithReplayChunk(jcache.Options{Dir: t.TempDir(), NoSync: true, NoSocket: true, Shard: so}, 37)
	for _, h := range hooks {
		o = h(o)
	}
	mgr := newManager(t, rc, ctrl.Options{NewCache: jcache.NewFunc(o)})
	r.cache, r.c = mgr.GetCache().(*jcache.Cache), mgr.GetClient()
	ctx, cancel := context.WithCancel(context.Background())
	r.cancel = cancel
	inf := getInformer(t, ctx, mgr.GetCache(), &corev1.ConfigMap{})
	if _, err := inf.AddEventHandler(toolscache.ResourceEventHandlerFuncs{DeleteFunc: func(obj any) {
		if o, ok := obj.(toolscache.DeletedFinalStateUnknown); ok {
			obj = o.Obj
		}
		r.mu.Lock()
		r.deletes = append(r.deletes, obj.(client.Object).GetName())
		r.mu.Unlock()
	}}); err != nil {
		t.Fatal(err)
	}
	if err := ctrl.NewControllerManagedBy(mgr).Named("owners-"+name).
		WithOptions(controller.Options{NeedLeaderElection: ptr.To(false), SkipNameValidation: ptr.To(true)}).
		For(&corev1.ConfigMap{}).
		Owns(&corev1.Secret{}, builder.OnlyMetadata).
		Complete(r); err != nil {
		t.Fatal(err)
	}
	go func() { r.done <- mgr.Start(ctx) }()
	return r
}

// stop stops the replica's manager and waits for it.
func (r *shardReplica) stop(t *testing.T) {
	t.Helper()
	r.stopped.Store(true)
	r.cancel()
	if err := <-r.done; err != nil {
		t.Errorf("manager %s: %v", r.name, err)
	}
}

// waitShard polls cond every 50 ms for up to a minute, failing with what
// describe says of the last state.
func waitShard(t *testing.T, why string, cond func() bool, describe func() string) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: timed out; last state: %s", why, describe())
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// settled reports whether every replica's status is settled with the
// members of rs.
func settled(rs []*shardReplica) bool {
	var names []string
	for _, r := range rs {
		names = append(names, r.name)
	}
	slices.Sort(names)
	for _, r := range rs {
		st := r.cache.ShardStatus()
		if !st.Settled || !slices.Equal(st.Members, names) {
			return false
		}
	}
	return true
}

func describeShards(rs []*shardReplica) string {
	var b strings.Builder
	for _, r := range rs {
		st := r.cache.ShardStatus()
		fmt.Fprintf(&b, "\n  %s: members %v settled %v held %.60q target %.60q published %.60q error %v reconciled %d",
			r.name, st.Members, st.Settled, st.Held, st.Target, st.Published, st.LastError, len(r.counts()))
	}
	return b.String()
}

// holders returns, for each owner, the replicas of rs that hold it.
func holders(t *testing.T, kube kubernetes.Interface, ns string, rs []*shardReplica) map[string][]string {
	t.Helper()
	return cacheHolders(t, kube, ns, "owner-", len(rs), func(i int) (string, *jcache.Cache) { return rs[i].name, rs[i].cache })
}

// cacheHolders returns, for each ConfigMap of ns whose name starts with
// prefix, the names of the n replicas (replica i's name and cache given
// by replica(i)) whose caches hold it, in the order of i.
func cacheHolders(t *testing.T, kube kubernetes.Interface, ns, prefix string, n int, replica func(i int) (string, *jcache.Cache)) map[string][]string {
	t.Helper()
	l, err := kube.CoreV1().ConfigMaps(ns).List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	out := map[string][]string{}
	for i := range l.Items {
		cm := &l.Items[i]
		if !strings.HasPrefix(cm.Name, prefix) {
			continue
		}
		out[cm.Name] = []string{}
		for j := range n {
			if name, c := replica(j); c.Holds(cm) {
				out[cm.Name] = append(out[cm.Name], name)
			}
		}
	}
	return out
}

// logShares logs how many owners each replica of rs holds and returns
// that count by replica name.
func logShares(t *testing.T, kube kubernetes.Interface, ns string, rs []*shardReplica) map[string]int {
	t.Helper()
	share := map[string]int{}
	for _, hs := range holders(t, kube, ns, rs) {
		share[hs[0]]++
	}
	t.Logf("owners held: %v", share)
	return share
}

// movedOwners counts the owners whose first holder among rs is not the
// one before gave.
func movedOwners(t *testing.T, kube kubernetes.Interface, ns string, rs []*shardReplica, before map[string][]string) int {
	t.Helper()
	moved := 0
	for o, hs := range holders(t, kube, ns, rs) {
		if hs[0] != before[o][0] {
			moved++
		}
	}
	return moved
}

// killJoinLeave makes, each through change, the membership changes of
// the owner tests on the group rs = r0, r1, r2: r1 killed, r3 joins
// (made by join), r2 leaves.
func killJoinLeave(t *testing.T, rs []*shardReplica, join func(name string) *shardReplica, change func(why string, do func() []*shardReplica)) {
	t.Helper()
	r0, r1, r2 := rs[0], rs[1], rs[2]
	change("r1 killed: r0 and r2 take its owners over once its Lease expires", func() []*shardReplica {
		r1.stop(t)
		return []*shardReplica{r0, r2}
	})
	var r3 *shardReplica
	change("r3 joins: owners move to it from live replicas", func() []*shardReplica {
		r3 = join("r3")
		return []*shardReplica{r0, r2, r3}
	})
	change("r2 leaves: r0 and r3 take its owners over", func() []*shardReplica {
		r2.stop(t)
		return []*shardReplica{r0, r3}
	})
}

// noOwnerDeleted checks that no replica of all had a handler given
// OnDelete, a reconcile finding its owner missing, or a reconcile of an
// owner it did not hold.
func noOwnerDeleted(t *testing.T, all []*shardReplica) {
	t.Helper()
	for _, r := range all {
		r.mu.Lock()
		if len(r.deletes) > 0 || len(r.notFound) > 0 || len(r.notHeld) > 0 {
			t.Errorf("%s: handlers got OnDelete for %v, reconciles found no object for %v, reconciled not held %v; want none (no owner was deleted)",
				r.name, r.deletes, r.notFound, r.notHeld)
		}
		r.mu.Unlock()
	}
}

func TestShard_OwnersReconciledByTheirHolder(t *testing.T) {
	cp, kube, ns := setup(t)
	const owners = 300
	cfg := func() *jcache.ShardOptions {
		return &jcache.ShardOptions{
			Group: "owners", Namespace: ns,
			Resources:     []schema.GroupResource{{Resource: "configmaps"}, {Resource: "secrets"}},
			LeaseDuration: 3 * time.Second, RenewInterval: 500 * time.Millisecond,
		}
	}
	var rs []*shardReplica
	// r1 is killed below: its cache leaves its Lease behind.
	rs = append(rs, startShardReplica(t, cp.RESTConfig(), cfg, "r0"),
		startShardReplica(t, cp.RESTConfig(), cfg, "r1", jcache.AbandonShardLease),
		startShardReplica(t, cp.RESTConfig(), cfg, "r2"))
	all := slices.Clone(rs)
	defer func() {
		for _, r := range all {
			r.cancel()
		}
	}()
	waitShard(t, "three replicas settle", func() bool { return settled(rs) }, func() string { return describeShards(rs) })

	// Owners created while the group is settled: each reconciled by
	// exactly the replica that holds it.
	createCMs(t, kube, ns, owners, func(i int) string { return fmt.Sprintf("owner-%03d", i) }, func(int) string { return "v" })
	reconciledBy := func(owner string, among []*shardReplica) []string {
		var out []string
		for _, r := range among {
			if r.counts()[owner] > 0 {
				out = append(out, r.name)
			}
		}
		return out
	}
	everyOwnerOnce := func() (bool, string) {
		h := holders(t, kube, ns, rs)
		for o, hs := range h {
			if len(hs) != 1 || !slices.Equal(reconciledBy(o, rs), hs) {
				return false, fmt.Sprintf("%s: held by %v, reconciled by %v", o, hs, reconciledBy(o, rs))
			}
		}
		return len(h) == owners, fmt.Sprintf("%d owners", len(h))
	}
	var last string
	waitShard(t, "every owner reconciled by its holder alone", func() bool {
		ok, why := everyOwnerOnce()
		last = why
		return ok
	}, func() string { return last + describeShards(rs) })
	logShares(t, kube, ns, rs)

	// A child's event reaches its owner's replica: deleting children
	// reconciles their owners there (and they are created again).
	before := map[string]map[string]int{}
	for _, r := range rs {
		before[r.name] = r.counts()
	}
	h := holders(t, kube, ns, rs)
	for i := 0; i < owners; i += 10 {
		o := fmt.Sprintf("owner-%03d", i)
		if err := kube.CoreV1().Secrets(ns).Delete(context.Background(), o+"-child", metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	waitShard(t, "each deleted child's owner reconciled again by its holder", func() bool {
		for i := 0; i < owners; i += 10 {
			o := fmt.Sprintf("owner-%03d", i)
			for _, r := range rs {
				if r.name == h[o][0] && r.counts()[o] <= before[r.name][o] {
					last = fmt.Sprintf("%s: %s reconciled it %d times, %d before", o, r.name, r.counts()[o], before[r.name][o])
					return false
				}
			}
		}
		return true
	}, func() string { return last })
	for _, r := range rs {
		for o, n := range r.counts() {
			if r.name != h[o][0] && n != before[r.name][o] {
				t.Errorf("%s reconciled %s (held by %s) after its child was deleted", r.name, o, h[o][0])
			}
		}
	}

	// A membership change: every owner whose holder changed is reconciled
	// by its new holder, and each owner is held by one replica.
	change := func(why string, do func() []*shardReplica) {
		t.Helper()
		before := holders(t, kube, ns, rs)
		counts := map[string]map[string]int{}
		for _, r := range rs {
			counts[r.name] = r.counts()
		}
		start := time.Now()
		rs = do()
		waitShard(t, why, func() bool {
			if !settled(rs) {
				last = "not settled"
				return false
			}
			for o, hs := range holders(t, kube, ns, rs) {
				if len(hs) != 1 {
					last = fmt.Sprintf("%s held by %v", o, hs)
					return false
				}
				if hs[0] != before[o][0] {
					r := rs[slices.IndexFunc(rs, func(r *shardReplica) bool { return r.name == hs[0] })]
					if r.counts()[o] <= counts[r.name][o] {
						last = fmt.Sprintf("%s moved from %s to %s, not reconciled there since", o, before[o][0], hs[0])
						return false
					}
				}
			}
			return true
		}, func() string { return last + describeShards(rs) })
		t.Logf("%s: %d owners moved, every one reconciled by its new holder within %v", why, movedOwners(t, kube, ns, rs, before), time.Since(start).Round(100*time.Millisecond))
	}
	killJoinLeave(t, rs, func(name string) *shardReplica {
		r := startShardReplica(t, cp.RESTConfig(), cfg, name)
		all = append(all, r)
		return r
	}, change)

	// The end: every owner held by one replica, which reconciled it; no
	// replica's handlers got a delete, none reconciled a missing owner or
	// one it did not hold.
	for o, hs := range holders(t, kube, ns, rs) {
		r := rs[slices.IndexFunc(rs, func(r *shardReplica) bool { return r.name == hs[0] })]
		if r.counts()[o] == 0 {
			t.Errorf("%s held by %s, never reconciled there", o, r.name)
		}
	}
	noOwnerDeleted(t, all)
}

// An Exact source of a sharded resource fails the manager's start with
// ErrExactSharded, rather than deliver every object of the file.
func TestShard_ExactSourceRefused(t *testing.T) {
	cp, kube, ns := setup(t)
	createCM(t, kube, ns, "a", nil, nil)
	mgr := newManager(t, cp.RESTConfig(), ctrl.Options{
		NewCache: jcache.NewFunc(jcache.Options{Dir: t.TempDir(), NoSync: true, NoSocket: true, Shard: &jcache.ShardOptions{
			Group: "exact", Member: "r0", Namespace: ns, Resources: []schema.GroupResource{{Resource: "configmaps"}}}}),
	})
	r := &shardReplica{name: "r0", reconciled: map[string]int{}, cache: mgr.GetCache().(*jcache.Cache), c: mgr.GetClient()}
	ex := jcache.Exact(mgr.GetCache(), "sharded")
	if err := ctrl.NewControllerManagedBy(mgr).Named("sharded").
		WithOptions(controller.Options{SkipNameValidation: ptr.To(true)}).
		WatchesRawSource(ex.Kind(&corev1.ConfigMap{}, &handler.EnqueueRequestForObject{})).
		Complete(ex.Reconciler(r)); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if err := mgr.Start(ctx); !errors.Is(err, jcache.ErrExactSharded) {
		t.Fatalf("manager Start = %v; want ErrExactSharded", err)
	}
	if got := r.counts(); len(got) != 0 {
		t.Errorf("reconciled %v; want none", got)
	}
}
