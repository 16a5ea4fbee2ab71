package jcache_test

// Warm standby of Exact (ExactOptions.Standby) against the real
// apiserver: two replicas, each with its own cache directory, under
// leader election on a real Lease.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/go-logr/logr/testr"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/resourceversion"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	crcache "sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrlconfig "sigs.k8s.io/controller-runtime/pkg/config"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/watchjournal/watchjournal/internal/controlplane"
	"github.com/watchjournal/watchjournal/jcache"
)

const (
	sbElection = "mirror-leader"
	sbPosition = "mirror-position"
	sbConsumer = "exact/mirror/v1/ConfigMap"
	sbSAs      = "exact/mirror/v1/ServiceAccount"
)

// valueReader records, per ConfigMap name of namespace ns, the data value
// "v" each reconcile read from the server ("-" for NotFound). The cache
// holds every namespace (a cache of one namespace has one informer per
// namespace, which Exact refuses): other namespaces' requests succeed
// unrecorded.
type valueReader struct {
	kube    kubernetes.Interface
	ns      string
	mu      sync.Mutex
	seen    map[string][]string
	changed chan struct{}
}

func newValueReader(kube kubernetes.Interface, ns string) *valueReader {
	return &valueReader{kube: kube, ns: ns, seen: map[string][]string{}, changed: make(chan struct{}, 1)}
}

func (r *valueReader) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	if req.Namespace != r.ns {
		return reconcile.Result{}, nil
	}
	v := "-"
	cm, err := r.kube.CoreV1().ConfigMaps(req.Namespace).Get(ctx, req.Name, metav1.GetOptions{})
	switch {
	case err == nil:
		v = cm.Data["v"]
	case !apierrors.IsNotFound(err):
		return reconcile.Result{}, err
	}
	time.Sleep(5 * time.Millisecond) // a reconcile takes a moment: the stop finds some in flight
	r.mu.Lock()
	r.seen[req.Name] = append(r.seen[req.Name], v)
	r.mu.Unlock()
	select {
	case r.changed <- struct{}{}:
	default:
	}
	return reconcile.Result{}, nil
}

func (r *valueReader) names() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make([]string, 0, len(r.seen))
	for n := range r.seen {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

func (r *valueReader) last(name string) string {
	r.mu.Lock()
	defer r.mu.Unlock()
	if vs := r.seen[name]; len(vs) > 0 {
		return vs[len(vs)-1]
	}
	return ""
}

func (r *valueReader) wait(t *testing.T, what string, cond func() bool, state func() any) {
	t.Helper()
	deadline := time.After(90 * time.Second)
	for !cond() {
		select {
		case <-r.changed:
		case <-time.After(100 * time.Millisecond):
		case <-deadline:
			t.Fatalf("timed out waiting for %s; last state %v", what, state())
		}
	}
}

// exReplica is one process of an operator: a manager with a jcache cache
// in its own directory, leader election on a real Lease, and the
// controller "mirror" with one Exact source (For-like: ConfigMaps,
// EnqueueRequestForObject) with a warm standby.
type exReplica struct {
	mgr  manager.Manager
	src  *jcache.ExactSource
	r    *valueReader
	stop func()
}

type rtFunc func(*http.Request) (*http.Response, error)

func (f rtFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// startExactReplica starts a replica; with cut non-nil, once cut is set
// its requests to the position Lease fail (a dead process's last publish
// is lost).
func startExactReplica(t *testing.T, cp *controlplane.ControlPlane, ns, id string, r *valueReader, cut *atomic.Bool) *exReplica {
	t.Helper()
	cfg := rest.CopyConfig(cp.RESTConfig())
	if cut != nil {
		cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper {
			return rtFunc(func(req *http.Request) (*http.Response, error) {
				if cut.Load() && strings.Contains(req.URL.Path, "/leases/"+sbPosition) {
					return nil, errors.New("cut: the process is dead")
				}
				return rt.RoundTrip(req)
			})
		})
	}
	mgr, err := manager.New(cfg, manager.Options{
		NewCache:                      jcache.NewFunc(jcache.Options{Dir: t.TempDir(), NoSync: true, Logger: testr.New(t).WithValues("replica", id)}),
		Metrics:                       metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress:        "0",
		Controller:                    ctrlconfig.Controller{SkipNameValidation: ptr.To(true)},
		LeaderElection:                true,
		LeaderElectionID:              sbElection,
		LeaderElectionNamespace:       ns,
		LeaderElectionReleaseOnCancel: true,
		LeaseDuration:                 ptr.To(3 * time.Second),
		RenewDeadline:                 ptr.To(2 * time.Second),
		RetryPeriod:                   ptr.To(200 * time.Millisecond),
	})
	if err != nil {
		t.Fatal(err)
	}
	ex := jcache.ExactWith(mgr.GetCache(), "mirror", jcache.ExactOptions{
		Standby: &jcache.Standby{Namespace: ns, Name: sbPosition, Identity: id, Interval: 200 * time.Millisecond}})
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
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- mgr.Start(ctx) }()
	var once sync.Once
	rep := &exReplica{mgr: mgr, src: src, r: r}
	rep.stop = func() {
		once.Do(func() {
			cancel()
			if err := <-done; err != nil {
				t.Errorf("replica %s: manager Start = %v", id, err)
			}
			if err := src.Err(); err != nil {
				t.Errorf("replica %s: source Err = %v after a clean shutdown", id, err)
			}
		})
	}
	t.Cleanup(rep.stop)
	return rep
}

func (rep *exReplica) elected(t *testing.T, within time.Duration) {
	t.Helper()
	select {
	case <-rep.mgr.Elected():
	case <-time.After(within):
		t.Fatalf("replica not elected within %v", within)
	}
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
	l, err := kube.CoordinationV1().Leases(ns).Get(ctx, sbPosition, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return ""
	}
	if err != nil {
		t.Fatal(err)
	}
	raw := l.Annotations[jcache.AnnotationExactPositions]
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

func rvAfter(a, b string) bool {
	n, err := resourceversion.CompareResourceVersion(a, b)
	if err != nil {
		panic(err)
	}
	return n > 0
}

// Issue 24 item 3 on the builder path: the leader (a) reconciles every
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
	if _, err := kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	cms := kube.CoreV1().ConfigMaps(ns)
	var static, changing []string
	for i := 0; i < 40; i++ {
		static = append(static, fmt.Sprintf("s%02d", i))
	}
	for i := 0; i < 30; i++ {
		changing = append(changing, fmt.Sprintf("c%02d", i))
	}
	for _, n := range append(append([]string{"w"}, static...), changing...) {
		if _, err := cms.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: n}, Data: map[string]string{"v": "0"}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	const all = 71 // the test's control plane runs no controller-manager: no kube-root-ca.crt
	// The ServiceAccount "w" (no controller-manager: no "default" one)
	// changes with the ConfigMap w, before the stream: the new leader
	// must not reconcile w for it (it would, replaying the second source).
	if _, err := kube.CoreV1().ServiceAccounts(ns).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "w"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	var cut atomic.Bool
	a := startExactReplica(t, cp, ns, "a", newValueReader(kube, ns), &cut)
	a.elected(t, 30*time.Second)
	b := startExactReplica(t, cp, ns, "b", newValueReader(kube, ns), nil)

	a.r.wait(t, "a reconciled every ConfigMap and published its position", func() bool {
		return len(a.r.names()) == all && exPublished(t, ctx, kube, ns) != "" && exPublishedFor(t, ctx, kube, ns, sbSAs) != ""
	}, func() any { return map[string]any{"a": len(a.r.names()), "position": exPublished(t, ctx, kube, ns)} })

	rvs := map[string]string{}
	update := func(n string) {
		t.Helper()
		cm, err := cms.Get(ctx, n, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		cm.Data["v"] = "1"
		cm, err = cms.Update(ctx, cm, metav1.UpdateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		rvs[n] = cm.ResourceVersion
	}
	// While it stands by, b's follower commits b's consumer behind a's
	// position: w's change, once a reconciled and published it, moves
	// b's commit past b's list.
	_, h0, err := jcache.StandbyCommitted(ctx, b.src)
	if err != nil {
		t.Fatal(err)
	}
	update("w")
	saBefore := exPublishedFor(t, ctx, kube, ns, sbSAs)
	if _, err := kube.CoreV1().ServiceAccounts(ns).Patch(ctx, "w", types.MergePatchType, []byte(`{"metadata":{"labels":{"v":"1"}}}`), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	a.r.wait(t, "a published the ServiceAccount source's position past w's change", func() bool {
		p := exPublishedFor(t, ctx, kube, ns, sbSAs)
		return p != saBefore && rvAfter(p, saBefore)
	}, func() any { return exPublishedFor(t, ctx, kube, ns, sbSAs) })
	a.r.wait(t, "b's consumer following a's position past w's change", func() bool {
		c, _, err := jcache.StandbyCommitted(ctx, b.src)
		return err == nil && c > h0
	}, func() any {
		c, h, err := jcache.StandbyCommitted(ctx, b.src)
		return map[string]any{"b committed": c, "b head": h, "b head before w": h0, "err": err, "position": exPublished(t, ctx, kube, ns)}
	})
	if got := b.r.names(); len(got) != 0 {
		t.Fatalf("the standby reconciled %v; want nothing before it leads", got)
	}

	for _, n := range changing[:15] {
		update(n)
		time.Sleep(10 * time.Millisecond)
	}
	cut.Store(crash)
	a.stop()
	final := exPublished(t, ctx, kube, ns)
	for _, n := range changing[15:] {
		update(n)
	}
	b.elected(t, 30*time.Second)

	var changedAfter []string
	for _, n := range append([]string{"w"}, changing...) {
		if rvAfter(rvs[n], final) {
			changedAfter = append(changedAfter, n)
		}
	}
	b.r.wait(t, "b reconciled every change past a's last position", func() bool {
		for _, n := range changedAfter {
			if b.r.last(n) != "1" {
				return false
			}
		}
		return true
	}, func() any { return map[string]any{"b": b.r.names(), "want": changedAfter, "position": final} })
	for _, n := range changing[15:] {
		if b.r.last(n) != "1" {
			t.Errorf("b did not reconcile %s after its change (last saw v=%q)", n, b.r.last(n))
		}
	}
	want := map[string]bool{}
	for _, n := range changedAfter {
		want[n] = true
	}
	for _, n := range b.r.names() {
		if !want[n] {
			t.Errorf("b reconciled %s, which did not change after a's last position %s (rv %s)", n, final, rvs[n])
		}
	}
	t.Logf("a reconciled %d; %d changes, a stopped after 15; a's last position %s; b reconciled %d: %v",
		len(a.r.names()), len(changing), final, len(b.r.names()), b.r.names())
	if len(b.r.names()) > len(changing) {
		t.Fatalf("b reconciled %d objects; want at most the %d that changed", len(b.r.names()), len(changing))
	}
	b.r.wait(t, "b published a position past a's", func() bool {
		p := exPublished(t, ctx, kube, ns)
		return p != "" && rvAfter(p, final)
	}, func() any { return exPublished(t, ctx, kube, ns) })
}

// ExactOptions.Standby without AddToManager, or without a namespace,
// fails the source's Start (and so the manager's) instead of running a
// cold standby that publishes nothing.
func TestExactStandby_NotAdded(t *testing.T) {
	c, err := jcache.NewFunc(jcache.Options{Dir: t.TempDir()})(&rest.Config{Host: "http://127.0.0.1:1"}, crcache.Options{Mapper: staticMapper()})
	if err != nil {
		t.Fatal(err)
	}
	q := workqueue.NewTypedRateLimitingQueue(workqueue.DefaultTypedControllerRateLimiter[reconcile.Request]())
	defer q.ShutDown()
	ex := jcache.ExactWith(c, "mirror", jcache.ExactOptions{Standby: &jcache.Standby{Namespace: "mirror-system"}})
	if err := ex.Kind(&corev1.ConfigMap{}, &handler.EnqueueRequestForObject{}).Start(context.Background(), q); !errors.Is(err, jcache.ErrStandbyNotAdded) {
		t.Errorf("Start without AddToManager = %v; want ErrStandbyNotAdded", err)
	}
	ex = jcache.ExactWith(c, "other", jcache.ExactOptions{Standby: &jcache.Standby{}})
	if err := ex.Kind(&corev1.ConfigMap{}, &handler.EnqueueRequestForObject{}).Start(context.Background(), q); err == nil || !strings.Contains(err.Error(), "Standby.Namespace") {
		t.Errorf("Start with Standby.Namespace empty = %v; want an error naming it", err)
	}
}
