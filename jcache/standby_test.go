package jcache_test

// Warm standby of Exact (ExactOptions.Standby) against the real
// apiserver: two replicas, each with its own cache directory, under
// leader election on a real Lease.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/go-logr/logr/testr"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	crcache "sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/watchjournal/watchjournal/internal/testing/controlplane"
	"github.com/watchjournal/watchjournal/internal/testing/standbytest"
	"github.com/watchjournal/watchjournal/jcache"
	"github.com/watchjournal/watchjournal/journal"
)

const (
	sbElection = "mirror-leader"
	sbPosition = "mirror-position"
	sbConsumer = "exact/mirror/v1/ConfigMap"
	sbSAs      = "exact/mirror/v1/ServiceAccount"
)

// exReplica is one process of an operator: a manager with a jcache cache
// in its own directory, leader election on a real Lease, and the
// controller "mirror" with one Exact source (For-like: ConfigMaps,
// EnqueueRequestForObject) with a warm standby.
type exReplica struct {
	mgr  manager.Manager
	src  *jcache.ExactSource
	r    *standbytest.Reader
	stop func()
}

// startExactReplica starts a replica; with cut non-nil, once cut is set
// its requests to the position Lease fail (a dead process's last publish
// is lost).
func startExactReplica(t *testing.T, cp *controlplane.ControlPlane, ns, id string, r *standbytest.Reader, cut *atomic.Bool) *exReplica {
	t.Helper()
	return startExactReplicaWith(t, cp, ns, id, r, cut, 0)
}

// startExactReplicaWith is startExactReplica with ExactOptions.MaxPending
// maxPending (0: the default).
func startExactReplicaWith(t *testing.T, cp *controlplane.ControlPlane, ns, id string, r *standbytest.Reader, cut *atomic.Bool, maxPending int) *exReplica {
	t.Helper()
	return startExactReplicaOn(t, cp, ns, id, r, cut, maxPending,
		jcache.Options{Dir: t.TempDir(), NoSync: true, Logger: testr.New(t).WithValues("replica", id)})
}

// startExactReplicaOn is startExactReplicaWith whose cache is built from
// o (its own directory, logger, retention).
func startExactReplicaOn(t *testing.T, cp *controlplane.ControlPlane, ns, id string, r *standbytest.Reader, cut *atomic.Bool, maxPending int, o jcache.Options) *exReplica {
	t.Helper()
	cfg := rest.CopyConfig(cp.RESTConfig())
	if cut != nil {
		cfg = standbytest.Cut(cfg, cut, sbPosition)
	}
	opts := standbytest.ManagerOptions(ns, sbElection)
	opts.NewCache = jcache.NewFunc(o)
	mgr, err := manager.New(cfg, opts)
	if err != nil {
		t.Fatal(err)
	}
	ex := jcache.ExactWith(mgr.GetCache(), "mirror", jcache.ExactOptions{MaxPending: maxPending,
		Standby: &jcache.Standby{Namespace: ns, Name: sbPosition, Identity: id, Interval: 200 * time.Millisecond, LeaderElectionID: sbElection}})
	if err := ex.AddToManager(mgr); err != nil {
		t.Fatal(err)
	}
	src := ex.Kind(&corev1.ConfigMap{}, &handler.EnqueueRequestForObject{})
	// A Watches-style second source, on the same position Lease: a
	// ServiceAccount maps to the ConfigMap of its name.
	sas := ex.Kind(&corev1.ServiceAccount{}, handler.EnqueueRequestsFromMapFunc(func(_ context.Context, o client.Object) []reconcile.Request {
		return []reconcile.Request{{NamespacedName: types.NamespacedName{Namespace: o.GetNamespace(), Name: o.GetName()}}}
	}))
	if err := builder.ControllerManagedBy(mgr).Named("mirror").WatchesRawSource(src).WatchesRawSource(sas).Complete(ex.Reconciler(r)); err != nil {
		t.Fatal(err)
	}
	rep := &exReplica{mgr: mgr, src: src, r: r}
	rep.stop = standbytest.Run(t, mgr, id, func() {
		if err := src.Err(); err != nil {
			t.Errorf("replica %s: source Err = %v after a clean shutdown", id, err)
		}
	})
	return rep
}

func (rep *exReplica) elected(t *testing.T, within time.Duration) {
	t.Helper()
	standbytest.Elected(t, rep.mgr, within)
}

// exPublished returns the ConfigMap source's position on the position
// Lease, "" when none.
func exPublished(t *testing.T, ctx context.Context, kube kubernetes.Interface, ns string) string {
	t.Helper()
	return exPublishedFor(t, ctx, kube, ns, sbConsumer)
}

// exPublishedFor returns consumer's position on the position Lease, ""
// when none.
func exPublishedFor(t *testing.T, ctx context.Context, kube kubernetes.Interface, ns, consumer string) string {
	t.Helper()
	raw := standbytest.Annotation(t, ctx, kube, ns, sbPosition, jcache.AnnotationExactPositions)
	if raw == "" {
		return ""
	}
	var m map[string]struct {
		ResourceVersion string `json:"resourceVersion"`
		Resource        string `json:"resource"`
	}
	if err := json.Unmarshal([]byte(raw), &m); err != nil {
		t.Fatalf("annotation %s = %q: %v", jcache.AnnotationExactPositions, raw, err)
	}
	return m[consumer].ResourceVersion
}

// The warm standby on the builder path: the leader (a) reconciles every
// ConfigMap through its Exact source and publishes the source's position;
// the standby (b) keeps its cache's journal current without reconciling,
// and its follower commits b's consumer behind a's position. Mid-stream
// of changes the leader stops; the changes go on; b takes over and
// reconciles exactly what changed after a's last published position:
// every change after the stop, none of the 40 objects that did not change
// (a first start, with no position, replays all 71).
//
// "crash": a's last publish is lost (its requests to the position Lease
// fail from the stop on), so b starts from the position a published
// before: more changes, still exactly those past the position on the
// Lease.
func TestExactStandby_FailoverReconcilesWhatChangedSincePublishedPosition(t *testing.T) {
	ctrllog.SetLogger(logr.Discard())
	cp := controlplane.StartT(t, controlplane.Options{})
	for _, crash := range []bool{false, true} {
		name := "graceful"
		if crash {
			name = "crash"
		}
		t.Run(name, func(t *testing.T) { testExactFailover(t, cp, "exstandby-"+name, crash) })
	}
}

func testExactFailover(t *testing.T, cp *controlplane.ControlPlane, ns string, crash bool) {
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	kube := kubernetes.NewForConfigOrDie(cp.RESTConfig())
	w := standbytest.NewWorkload(t, ctx, kube, ns)
	// standbytest.All ConfigMaps: the test's control plane runs no
	// controller-manager, so no kube-root-ca.crt joins them. The
	// ServiceAccount "w" (no controller-manager: no "default" one)
	// changes with the ConfigMap w, before the stream: the new leader
	// must not reconcile w for it (it would, replaying the second source).
	if _, err := kube.CoreV1().ServiceAccounts(ns).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "w"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	var cut atomic.Bool
	a := startExactReplica(t, cp, ns, "a", standbytest.NewReader(kube, ns), &cut)
	a.elected(t, 30*time.Second)
	b := startExactReplica(t, cp, ns, "b", standbytest.NewReader(kube, ns), nil)

	// b's files are current before anything changes: a change b's file
	// holds only in its first list (b listed after it) is no watch event
	// to place a's position after, and b would replay that file whole.
	for _, obj := range []client.Object{&corev1.ConfigMap{}, &corev1.ServiceAccount{}} {
		inf := getInformer(t, ctx, b.mgr.GetCache(), obj)
		if !toolscache.WaitForCacheSync(ctx.Done(), inf.HasSynced) {
			t.Fatalf("b's %T file did not sync", obj)
		}
	}
	a.r.Wait(t, "a reconciled every ConfigMap and published its position", func() bool {
		return len(a.r.Names()) == standbytest.All && exPublished(t, ctx, kube, ns) != "" && exPublishedFor(t, ctx, kube, ns, sbSAs) != ""
	}, func() any { return map[string]any{"a": len(a.r.Names()), "position": exPublished(t, ctx, kube, ns)} })

	// While it stands by, b's follower commits b's consumer behind a's
	// position: w's change, once a reconciled and published it, moves
	// b's commit past b's list.
	_, h0, err := jcache.StandbyCommitted(ctx, b.src)
	if err != nil {
		t.Fatal(err)
	}
	w.Update("w")
	saBefore := exPublishedFor(t, ctx, kube, ns, sbSAs)
	if _, err := kube.CoreV1().ServiceAccounts(ns).Patch(ctx, "w", types.MergePatchType, []byte(`{"metadata":{"labels":{"v":"1"}}}`), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	a.r.Wait(t, "a published the ServiceAccount source's position past w's change", func() bool {
		p := exPublishedFor(t, ctx, kube, ns, sbSAs)
		return p != saBefore && standbytest.After(p, saBefore)
	}, func() any { return exPublishedFor(t, ctx, kube, ns, sbSAs) })
	a.r.Wait(t, "b's consumer following a's position past w's change", func() bool {
		c, _, err := jcache.StandbyCommitted(ctx, b.src)
		return err == nil && c > h0
	}, func() any {
		c, h, err := jcache.StandbyCommitted(ctx, b.src)
		return map[string]any{"b committed": c, "b head": h, "b head before w": h0, "err": err, "position": exPublished(t, ctx, kube, ns)}
	})
	if got := b.r.Names(); len(got) != 0 {
		t.Fatalf("the standby reconciled %v; want nothing before it leads", got)
	}

	pub := func() string { return exPublished(t, ctx, kube, ns) }
	w.Failover(&cut, crash,
		standbytest.Replica{R: a.r, Stop: a.stop, Publish: pub},
		standbytest.Replica{R: b.r, Elected: func() { b.elected(t, 30*time.Second) }, Publish: pub})
}

// ExactOptions.Standby without AddToManager, without LeaderElectionID or
// without a namespace, fails the source's Start (and so the manager's) instead of running a
// cold standby that publishes nothing.
func TestExactStandby_NotAdded(t *testing.T) {
	c, err := jcache.NewFunc(jcache.Options{Dir: t.TempDir()})(&rest.Config{Host: "http://127.0.0.1:1"}, crcache.Options{Mapper: staticMapper()})
	if err != nil {
		t.Fatal(err)
	}
	q := workqueue.NewTypedRateLimitingQueue(workqueue.DefaultTypedControllerRateLimiter[reconcile.Request]())
	defer q.ShutDown()
	ex := jcache.ExactWith(c, "mirror", jcache.ExactOptions{Standby: &jcache.Standby{Namespace: "mirror-system", LeaderElectionID: "mirror-leader"}})
	if err := ex.Kind(&corev1.ConfigMap{}, &handler.EnqueueRequestForObject{}).Start(context.Background(), q); !errors.Is(err, jcache.ErrStandbyNotAdded) {
		t.Errorf("Start without AddToManager = %v; want ErrStandbyNotAdded", err)
	}
	ex = jcache.ExactWith(c, "fenced", jcache.ExactOptions{Standby: &jcache.Standby{Namespace: "mirror-system"}})
	if err := ex.Kind(&corev1.ConfigMap{}, &handler.EnqueueRequestForObject{}).Start(context.Background(), q); !errors.Is(err, jcache.ErrStandbyNoElection) {
		t.Errorf("Start with Standby.LeaderElectionID empty = %v; want ErrStandbyNoElection", err)
	}
	ex = jcache.ExactWith(c, "other", jcache.ExactOptions{Standby: &jcache.Standby{}})
	if err := ex.Kind(&corev1.ConfigMap{}, &handler.EnqueueRequestForObject{}).Start(context.Background(), q); err == nil || !strings.Contains(err.Error(), "Standby.Namespace") {
		t.Errorf("Start with Standby.Namespace empty = %v; want an error naming it", err)
	}
}

// A replay hold left by a replica that died as leader mid-replay is
// dropped when the replica comes back as a standby: its follower places
// the consumer behind the new leader's position, and the hold would
// otherwise keep its file's retention back for good.
func TestExactStandby_FollowerDropsAnInterruptedReplaysHold(t *testing.T) {
	cp, kube, ns := setup(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	createMany(t, kube, ns, 5)
	dirA := t.TempDir()
	optA := jcache.Options{Dir: dirA, NoSync: true, Logger: testr.New(t).WithValues("replica", "a")}
	a := startExactReplicaOn(t, cp, ns, "a", standbytest.NewReader(kube, ns), nil, 0, optA)
	a.elected(t, 30*time.Second)
	a.r.Wait(t, "a reconciled", func() bool { c, _ := a.src.Committed(); return c > 0 }, func() any { return nil })
	a.stop()

	// As if a had died mid-replay: no consumer, the replay's hold left.
	paths, err := filepath.Glob(filepath.Join(dirA, "configmaps.*.db"))
	if err != nil || len(paths) != 1 {
		t.Fatalf("a's ConfigMap files: %v, %v; want one", paths, err)
	}
	j, err := journal.Open(paths[0], &journal.Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	head, err := j.Head()
	if err == nil {
		err = j.Consumers().Delete(sbConsumer)
	}
	if err == nil {
		err = j.Consumers().Create("replaying:"+sbConsumer, head+1)
	}
	if err := errors.Join(err, j.Close()); err != nil {
		t.Fatal(err)
	}

	b := startExactReplica(t, cp, ns, "b", standbytest.NewReader(kube, ns), nil)
	defer b.stop()
	b.elected(t, 60*time.Second)
	b.r.Wait(t, "b published", func() bool { return exPublished(t, ctx, kube, ns) != "" }, func() any { return nil })

	// a comes back as a standby; changes move b's position on.
	a2 := startExactReplicaOn(t, cp, ns, "a2", standbytest.NewReader(kube, ns), nil, 0, optA)
	defer a2.stop()
	var cs []journal.ConsumerInfo
	deadline := time.After(60 * time.Second)
	for i := 0; ; i++ {
		if cs, err = jcache.StandbyConsumers(ctx, a2.src); err != nil {
			t.Fatal(err)
		}
		if slices.ContainsFunc(cs, func(c journal.ConsumerInfo) bool { return c.Name == sbConsumer }) {
			break
		}
		patchCM(t, ctx, kube, ns, mpName(i%5), fmt.Sprint(i))
		select {
		case <-deadline:
			t.Fatalf("a2's follower did not place the consumer; consumers %v", cs)
		case <-time.After(500 * time.Millisecond):
		}
	}
	if slices.ContainsFunc(cs, func(c journal.ConsumerInfo) bool { return strings.HasPrefix(c.Name, "replaying:") }) {
		t.Fatalf("a2's consumers %v: the replay's hold stays on the standby", cs)
	}
}
