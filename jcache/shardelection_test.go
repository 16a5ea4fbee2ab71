package jcache_test

// Sharded and leader-elected controllers side by side against the real
// apiserver: two managers (replicas) with leader election on a Lease,
// each with a sharded cache, a sharded controller of ConfigMaps
// (NeedLeaderElection false) and an unsharded controller of Secrets
// (leader-elected, the default). The sharded controller reconciles on
// both replicas, each ConfigMap on the replica that holds it; the
// unsharded one only on the leader; once the leader stops, the other
// replica is elected, reconciles the Secrets, and takes the stopped
// replica's ConfigMaps over. With the unsharded controller on an Exact
// source with a warm standby, the new leader reconciles only what changed
// since the old one's last publish.

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/watchjournal/watchjournal/internal/testing/controlplane"
	"github.com/watchjournal/watchjournal/internal/testing/standbytest"
	"github.com/watchjournal/watchjournal/jcache"
)

// mixedReplica is one manager and what its controllers reconciled.
type mixedReplica struct {
	id    string
	mgr   manager.Manager
	cache *jcache.Cache
	stop  func()

	mu        sync.Mutex
	sharded   map[string]int // ConfigMap name → reconciles that found it held
	notHeld   []string       // ConfigMaps reconciled while not held
	unsharded map[string]int // Secret name → reconciles
}

func (r *mixedReplica) counts() (sharded, unsharded map[string]int, notHeld []string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return maps.Clone(r.sharded), maps.Clone(r.unsharded), slices.Clone(r.notHeld)
}

func (r *mixedReplica) elected() bool {
	select {
	case <-r.mgr.Elected():
		return true
	default:
		return false
	}
}

// startMixedReplica starts replica id: leader election on the Lease
// "mixed-leader" in ns, a cache sharded in the group "mixed" (ConfigMaps),
// the controllers "sharded" and "unsharded"; with exact, "unsharded"
// reads an Exact source with a warm standby (ExactOptions.Standby).
func startMixedReplica(t *testing.T, cp *controlplane.ControlPlane, ns, id string, exact bool) *mixedReplica {
	t.Helper()
	opts := standbytest.ManagerOptions(ns, "mixed-leader")
	opts.NewCache = jcache.NewFunc(jcache.Options{Dir: t.TempDir(), NoSync: true, NoSocket: true, Shard: &jcache.ShardOptions{
		Group: "mixed", Member: id, Namespace: ns,
		Resources:     []schema.GroupResource{{Resource: "configmaps"}},
		LeaseDuration: 3 * time.Second, RenewInterval: 500 * time.Millisecond,
	}})
	mgr, err := manager.New(cp.RESTConfig(), opts)
	if err != nil {
		t.Fatal(err)
	}
	r := &mixedReplica{id: id, mgr: mgr, cache: mgr.GetCache().(*jcache.Cache), sharded: map[string]int{}, unsharded: map[string]int{}}
	err = builder.ControllerManagedBy(mgr).Named("sharded").
		WithOptions(controller.Options{NeedLeaderElection: ptr.To(false)}).
		For(&corev1.ConfigMap{}).
		Complete(reconcile.Func(func(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
			var cm corev1.ConfigMap
			if err := mgr.GetClient().Get(ctx, req.NamespacedName, &cm); err != nil {
				return reconcile.Result{}, nil // none is deleted
			}
			r.mu.Lock()
			defer r.mu.Unlock()
			if !r.cache.Holds(&cm) {
				r.notHeld = append(r.notHeld, req.Name)
				return reconcile.Result{}, nil
			}
			r.sharded[req.Name]++
			return reconcile.Result{}, nil
		}))
	if err != nil {
		t.Fatal(err)
	}
	var rec reconcile.Reconciler = reconcile.Func(func(_ context.Context, req reconcile.Request) (reconcile.Result, error) {
		r.mu.Lock()
		r.unsharded[req.Name]++
		r.mu.Unlock()
		return reconcile.Result{}, nil
	})
	b := builder.ControllerManagedBy(mgr).Named("unsharded")
	if exact {
		ex := jcache.ExactWith(mgr.GetCache(), "unsharded", jcache.ExactOptions{Standby: &jcache.Standby{
			Namespace: ns, Name: "mixed-position", Identity: id, Interval: 200 * time.Millisecond, LeaderElectionID: "mixed-leader"}})
		if err := ex.AddToManager(mgr); err != nil {
			t.Fatal(err)
		}
		b, rec = b.WatchesRawSource(ex.Kind(&corev1.Secret{}, &handler.EnqueueRequestForObject{})), ex.Reconciler(rec)
	} else {
		b = b.For(&corev1.Secret{})
	}
	if err := b.Complete(rec); err != nil {
		t.Fatal(err)
	}
	r.stop = standbytest.Run(t, mgr, id, func() {})
	return r
}

// heldBy returns, for each ConfigMap of ns, the replicas of rs that hold
// it.
func heldBy(t *testing.T, kube kubernetes.Interface, ns string, rs []*mixedReplica) map[string][]string {
	t.Helper()
	return cacheHolders(t, kube, ns, "cm-", len(rs), func(i int) (string, *jcache.Cache) { return rs[i].id, rs[i].cache })
}

func createSecret(t *testing.T, kube kubernetes.Interface, ns, name string) {
	t.Helper()
	if _, err := kube.CoreV1().Secrets(ns).Create(context.Background(), &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, StringData: map[string]string{"k": "v"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

func TestShard_ShardedBesideLeaderElectedControllers(t *testing.T) {
	t.Run("unsharded controller", func(t *testing.T) { shardedBesideLeaderElected(t, false) })
	t.Run("unsharded controller on an Exact source with a warm standby", func(t *testing.T) { shardedBesideLeaderElected(t, true) })
}

func shardedBesideLeaderElected(t *testing.T, exact bool) {
	cp, kube, ns := setup(t)
	const cms, secrets = 60, 5
	createCMs(t, kube, ns, cms, func(i int) string { return fmt.Sprintf("cm-%02d", i) }, func(int) string { return "1" })
	for i := range secrets {
		createSecret(t, kube, ns, fmt.Sprintf("s-%d", i))
	}
	a := startMixedReplica(t, cp, ns, "a", exact)
	standbytest.Elected(t, a.mgr, 30*time.Second)
	b := startMixedReplica(t, cp, ns, "b", exact)
	rs := []*mixedReplica{a, b}

	var last string
	wait := func(why string, cond func() (bool, string)) {
		t.Helper()
		waitShard(t, why, func() bool {
			ok, s := cond()
			last = s
			return ok
		}, func() string { return last })
	}
	// everyCMByItsHolder: the group settled with the members live, every
	// ConfigMap held by one of them and reconciled there.
	everyCMByItsHolder := func(live []*mixedReplica) func() (bool, string) {
		return func() (bool, string) {
			var names []string
			for _, r := range live {
				names = append(names, r.id)
				if st := r.cache.ShardStatus(); !st.Settled || len(st.Members) != len(live) {
					return false, fmt.Sprintf("%s: members %v settled %v", r.id, st.Members, st.Settled)
				}
			}
			for cm, hs := range heldBy(t, kube, ns, live) {
				if len(hs) != 1 {
					return false, fmt.Sprintf("%s held by %v", cm, hs)
				}
				r := live[slices.IndexFunc(live, func(r *mixedReplica) bool { return r.id == hs[0] })]
				if s, _, _ := r.counts(); s[cm] == 0 {
					return false, fmt.Sprintf("%s held by %s, not reconciled there", cm, r.id)
				}
			}
			return true, ""
		}
	}
	secretsBy := func(r *mixedReplica, from, to int) func() (bool, string) {
		return func() (bool, string) {
			_, u, _ := r.counts()
			for i := from; i <= to; i++ {
				if u[fmt.Sprintf("s-%d", i)] == 0 {
					return false, fmt.Sprintf("%s (elected %v) reconciled Secrets %v; want s-%d..s-%d", r.id, r.elected(), u, from, to)
				}
			}
			return true, ""
		}
	}

	// a leads: the unsharded controller runs on a alone; the sharded one
	// on both, each ConfigMap reconciled by its holder.
	wait("both replicas reconcile the ConfigMaps they hold", everyCMByItsHolder(rs))
	createSecret(t, kube, ns, fmt.Sprintf("s-%d", secrets))
	wait("the leader reconciles every Secret", secretsBy(a, 0, secrets))
	bHolds := 0
	for _, hs := range heldBy(t, kube, ns, rs) {
		if hs[0] == "b" {
			bHolds++
		}
	}
	if bHolds == 0 || bHolds == cms {
		t.Fatalf("b holds %d of %d ConfigMaps; want a share", bHolds, cms)
	}
	if b.elected() {
		t.Fatal("b is elected while a leads")
	}
	if _, u, _ := b.counts(); len(u) != 0 {
		t.Errorf("b, not the leader, reconciled Secrets %v; want none", u)
	}
	t.Logf("a leads; b holds %d of %d ConfigMaps", bHolds, cms)

	// The leader stops: b is elected, reconciles the Secrets, and takes
	// a's ConfigMaps over.
	before, _, _ := b.counts()
	a.stop()
	standbytest.Elected(t, b.mgr, 30*time.Second)
	createSecret(t, kube, ns, fmt.Sprintf("s-%d", secrets+1))
	if exact {
		// The warm standby: only what changed since a's last publish.
		wait("b, elected, reconciles the Secret created since", secretsBy(b, secrets+1, secrets+1))
		if _, u, _ := b.counts(); slices.ContainsFunc(slices.Collect(maps.Keys(u)), func(s string) bool { return s != fmt.Sprintf("s-%d", secrets+1) }) {
			t.Errorf("b, the new leader of an Exact source with a standby, reconciled Secrets %v; want only s-%d (the others were reconciled before a's last publish)", u, secrets+1)
		}
	} else {
		wait("b, elected, reconciles every Secret", secretsBy(b, 0, secrets+1))
	}
	wait("b reconciles every ConfigMap", everyCMByItsHolder([]*mixedReplica{b}))
	after, _, _ := b.counts()
	took := 0
	for cm := range after {
		if before[cm] == 0 {
			took++
		}
	}
	t.Logf("after a stopped, b reconciled %d ConfigMaps it did not hold before", took)
	for _, r := range rs {
		if _, _, nh := r.counts(); len(nh) > 0 {
			t.Errorf("%s reconciled ConfigMaps it did not hold: %v", r.id, nh)
		}
	}
}
