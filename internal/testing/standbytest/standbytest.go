// Package standbytest is the test support of jcache's warm-standby tests:
// a Reconciler that records what it read, the replicas' manager options
// and position-Lease cut, and the failover scenario itself (Workload),
// against the real kube-apiserver.
package standbytest

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/resourceversion"
	"k8s.io/client-go/kubernetes"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	ctrlconfig "sigs.k8s.io/controller-runtime/pkg/config"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
)

// Reader is a Reconciler that reads each request's ConfigMap of namespace
// NS from the server and records the data value "v" it saw ("-" for
// NotFound), per name, in order. Other namespaces' requests succeed
// unrecorded (a cache of every namespace sees them).
type Reader struct {
	kube    kubernetes.Interface
	ns      string
	mu      sync.Mutex
	seen    map[string][]string
	changed chan struct{}
}

// NewReader returns a Reader of namespace ns.
func NewReader(kube kubernetes.Interface, ns string) *Reader {
	return &Reader{kube: kube, ns: ns, seen: map[string][]string{}, changed: make(chan struct{}, 1)}
}

// Reconcile reads and records the request's ConfigMap.
func (r *Reader) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
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

// Names returns the names reconciled, sorted.
func (r *Reader) Names() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Sorted(maps.Keys(r.seen))
}

// Last returns the value the last reconcile of name saw, "" when none.
func (r *Reader) Last(name string) string {
	r.mu.Lock()
	defer r.mu.Unlock()
	if vs := r.seen[name]; len(vs) > 0 {
		return vs[len(vs)-1]
	}
	return ""
}

// Wait waits until cond holds, checking after each reconcile and every
// 100 ms; after 90 s it fails the test with what and state().
func (r *Reader) Wait(t *testing.T, what string, cond func() bool, state func() any) {
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

// ManagerOptions returns a replica's manager options: leader election on
// the Lease election in ns (released on cancel, 3 s lease), no metrics or
// probe port.
func ManagerOptions(ns, election string) manager.Options {
	return manager.Options{
		Metrics:                       metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress:        "0",
		Controller:                    ctrlconfig.Controller{SkipNameValidation: ptr.To(true)},
		LeaderElection:                true,
		LeaderElectionID:              election,
		LeaderElectionNamespace:       ns,
		LeaderElectionReleaseOnCancel: true,
		LeaseDuration:                 ptr.To(3 * time.Second),
		RenewDeadline:                 ptr.To(2 * time.Second),
		RetryPeriod:                   ptr.To(200 * time.Millisecond),
	}
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// Cut returns a copy of cfg whose requests to the Lease lease fail once
// cut is set, as if the process had died: its last publish is lost.
func Cut(cfg *rest.Config, cut *atomic.Bool, lease string) *rest.Config {
	cfg = rest.CopyConfig(cfg)
	cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper {
		return roundTripFunc(func(req *http.Request) (*http.Response, error) {
			if cut.Load() && strings.Contains(req.URL.Path, "/leases/"+lease) {
				return nil, errors.New("cut: the process is dead")
			}
			return rt.RoundTrip(req)
		})
	})
	return cfg
}

// Elected waits until mgr leads.
func Elected(t *testing.T, mgr manager.Manager, within time.Duration) {
	t.Helper()
	select {
	case <-mgr.Elected():
	case <-time.After(within):
		t.Fatalf("replica not elected within %v", within)
	}
}

// After reports whether resourceVersion a is past b (both the
// apiserver's).
func After(a, b string) bool {
	n, err := resourceversion.CompareResourceVersion(a, b)
	if err != nil {
		panic(err)
	}
	return n > 0
}

// All is how many ConfigMaps a Workload creates: w, 40 that never change,
// 30 that change in the stream.
const All = 71

// Workload is the failover scenario's objects: in namespace NS, the
// ConfigMap w, 40 static ones (s00..s39) and 30 changing ones
// (c00..c29), each with data v=0.
type Workload struct {
	NS       string
	CMs      typedcorev1.ConfigMapInterface
	Changing []string
	RVs      map[string]string // the resourceVersion of each Update
	t        *testing.T
	ctx      context.Context
}

// NewWorkload creates the namespace ns and the Workload's ConfigMaps.
func NewWorkload(t *testing.T, ctx context.Context, kube kubernetes.Interface, ns string) *Workload {
	t.Helper()
	if _, err := kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	w := &Workload{NS: ns, CMs: kube.CoreV1().ConfigMaps(ns), RVs: map[string]string{}, t: t, ctx: ctx}
	var static []string
	for i := 0; i < 40; i++ {
		static = append(static, fmt.Sprintf("s%02d", i))
	}
	for i := 0; i < 30; i++ {
		w.Changing = append(w.Changing, fmt.Sprintf("c%02d", i))
	}
	for _, n := range append(append([]string{"w"}, static...), w.Changing...) {
		if _, err := w.CMs.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: n}, Data: map[string]string{"v": "0"}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	return w
}

// Update sets v=1 on the ConfigMap n and records its resourceVersion.
func (w *Workload) Update(n string) {
	w.t.Helper()
	cm, err := w.CMs.Get(w.ctx, n, metav1.GetOptions{})
	if err != nil {
		w.t.Fatal(err)
	}
	cm.Data["v"] = "1"
	cm, err = w.CMs.Update(w.ctx, cm, metav1.UpdateOptions{})
	if err != nil {
		w.t.Fatal(err)
	}
	w.RVs[n] = cm.ResourceVersion
}

// Replica is what Failover needs of one replica.
type Replica struct {
	R       *Reader
	Stop    func()        // stops its manager (gracefully)
	Elected func()        // waits until it leads
	Publish func() string // the position on the Lease, "" when none
}

// Failover runs the stream and the failover and checks its outcome: each
// changing ConfigMap once, v=1; the leader a stops half way (with crash,
// after cut is set, so its last publish is lost); the changes go on; b
// takes over. b must reconcile every change past a's last position on the
// Lease, every change after the stop among them, and nothing else; then
// publish a position past a's.
func (w *Workload) Failover(cut *atomic.Bool, crash bool, a, b Replica) {
	t := w.t
	t.Helper()
	for _, n := range w.Changing[:15] {
		w.Update(n)
		time.Sleep(10 * time.Millisecond)
	}
	// Graceful: a publishes its last position, then releases the election
	// Lease. Crash: its last publish fails.
	cut.Store(crash)
	a.Stop()
	final := a.Publish()
	for _, n := range w.Changing[15:] {
		w.Update(n)
	}
	b.Elected()

	var changedAfter []string // changes past a's last position
	for _, n := range append([]string{"w"}, w.Changing...) {
		if After(w.RVs[n], final) {
			changedAfter = append(changedAfter, n)
		}
	}
	b.R.Wait(t, "b reconciled every change past a's last position", func() bool {
		for _, n := range changedAfter {
			if b.R.Last(n) != "1" {
				return false
			}
		}
		return true
	}, func() any { return map[string]any{"b": b.R.Names(), "want": changedAfter, "position": final} })
	// Every change after the stop is among them: nothing lost.
	for _, n := range w.Changing[15:] {
		if b.R.Last(n) != "1" {
			t.Errorf("b did not reconcile %s after its change (last saw v=%q)", n, b.R.Last(n))
		}
	}
	// And nothing else: b starts after the last event of its journal that
	// a's position covers; its journal holds only watch events since its
	// list, so that is exactly the changes past the position.
	for _, n := range b.R.Names() {
		if !slices.Contains(changedAfter, n) {
			t.Errorf("b reconciled %s, which did not change after a's last position %s (rv %s)", n, final, w.RVs[n])
		}
	}
	t.Logf("a reconciled %d; %d changes, a stopped after 15; a's last position %s; b reconciled %d: %v",
		len(a.R.Names()), len(w.Changing), final, len(b.R.Names()), b.R.Names())
	if len(b.R.Names()) > len(w.Changing) {
		t.Fatalf("b reconciled %d objects; want at most the %d that changed", len(b.R.Names()), len(w.Changing))
	}
	// b publishes its own position as it goes.
	b.R.Wait(t, "b published a position past a's", func() bool {
		p := b.Publish()
		return p != "" && After(p, final)
	}, func() any { return b.Publish() })
}

// Run starts mgr and returns stop, also registered with t.Cleanup and
// idempotent: it cancels the manager's context, fails the test when
// Start returned an error, then calls after (the sources' own checks of a
// clean shutdown), for the replica id.
func Run(t *testing.T, mgr manager.Manager, id string, after func()) (stop func()) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- mgr.Start(ctx) }()
	var once sync.Once
	stop = func() {
		once.Do(func() {
			cancel()
			if err := <-done; err != nil {
				t.Errorf("replica %s: manager Start = %v", id, err)
			}
			after()
		})
	}
	t.Cleanup(stop)
	return stop
}

// Annotation returns the annotation key of the Lease lease in ns, ""
// when the Lease does not exist.
func Annotation(t *testing.T, ctx context.Context, kube kubernetes.Interface, ns, lease, key string) string {
	t.Helper()
	l, err := kube.CoordinationV1().Leases(ns).Get(ctx, lease, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return ""
	}
	if err != nil {
		t.Fatal(err)
	}
	return l.Annotations[key]
}
