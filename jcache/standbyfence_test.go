package jcache_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/watchjournal/watchjournal/internal/testing/standbytest"
	"github.com/watchjournal/watchjournal/jcache"
)

type fenceRoundTrip func(*http.Request) (*http.Response, error)

func (f fenceRoundTrip) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// A deposed leader's final publish is refused, and its successor's
// positions stand. Leader a (term of the election Lease's first holder)
// holds its reconciles until its publish to the position Lease is held in
// flight; then its election requests fail, so it loses leadership while b
// waits; cm0 changes; b is elected (one more leaseTransitions), replays,
// and publishes under its term a position past the change. Only then does a's held request go through: its final
// publish, on the stop that losing leadership makes, reads b's Lease and
// is refused instead of overwriting b's positions with its own.
func TestExactStandby_DeposedLeaderFinalPublishFenced(t *testing.T) {
	ctrllog.SetLogger(logr.Discard())
	cp, kube, ns := setupNS(t, "exfence")
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	for i := range 3 {
		createCM(t, kube, ns, fmt.Sprintf("cm%d", i), nil, map[string]string{"v": "0"})
	}

	// a's transport: once cut, its election requests fail; once hold,
	// its requests to the position Lease wait until release (or their
	// context ends), counted in held.
	var cut, hold atomic.Bool
	var held atomic.Int32
	release := make(chan struct{})
	cfgA := rest.CopyConfig(cp.RESTConfig())
	cfgA.Wrap(func(rt http.RoundTripper) http.RoundTripper {
		return fenceRoundTrip(func(req *http.Request) (*http.Response, error) {
			switch {
			case cut.Load() && strings.HasSuffix(req.URL.Path, "/leases/"+sbElection):
				return nil, errors.New("cut: a is partitioned from its election Lease")
			case hold.Load() && strings.HasSuffix(req.URL.Path, "/leases/"+sbPosition):
				held.Add(1)
				select {
				case <-release:
				case <-req.Context().Done():
					return nil, req.Context().Err()
				}
			}
			return rt.RoundTrip(req)
		})
	})
	gate := make(chan struct{}) // a's reconciles wait for it
	var reconciling atomic.Bool
	var logA logLines
	mgrA := newFenceReplica(t, cfgA, ns, "a", reconcile.Func(func(ctx context.Context, _ reconcile.Request) (reconcile.Result, error) {
		reconciling.Store(true)
		select {
		case <-gate:
		case <-ctx.Done():
		}
		return reconcile.Result{}, nil
	}), logA.logger())
	ctxA, cancelA := context.WithCancel(context.Background())
	defer cancelA()
	doneA := make(chan error, 1)
	go func() { doneA <- mgrA.Start(ctxA) }()
	standbytest.Elected(t, mgrA, 30*time.Second)
	termA := electionTerm(t, ctx, kube, ns)

	rB := standbytest.NewReader(kube, ns)
	mgrB := newFenceReplica(t, cp.RESTConfig(), ns, "b", rB, logr.Discard())
	standbytest.Run(t, mgrB, "b", func() {})

	// a's sources read the (empty) position Lease before they queue their
	// replay: once a reconciles, hold its position requests, then let
	// its reconciles go; its first publish is held in flight.
	waitFor(t, "a reconciling its replay", reconciling.Load, func() any { return nil })
	hold.Store(true)
	close(gate)
	waitFor(t, "a's first publish held in flight", func() bool { return held.Load() > 0 }, func() any { return held.Load() })

	// a loses its election; cm0 changes; b takes over and publishes,
	// under its term, a position past the change.
	cut.Store(true)
	if err := <-doneA; err == nil || !strings.Contains(err.Error(), "leader election lost") {
		t.Errorf("a's manager Start = %v; want leader election lost", err)
	}
	cm, err := kube.CoreV1().ConfigMaps(ns).Patch(ctx, "cm0", types.MergePatchType, []byte(`{"data":{"v":"1"}}`), metav1.PatchOptions{})
	if err != nil {
		t.Fatal(err)
	}
	standbytest.Elected(t, mgrB, 30*time.Second)
	var termB positionTerm
	waitFor(t, "b publishing under its term past cm0's change", func() bool {
		l, err := kube.CoordinationV1().Leases(ns).Get(ctx, sbPosition, metav1.GetOptions{})
		if err != nil || ptr.Deref(l.Spec.HolderIdentity, "") != "b" {
			return false
		}
		p := exPublished(t, ctx, kube, ns)
		return p != "" && !standbytest.After(cm.ResourceVersion, p) && json.Unmarshal([]byte(l.Annotations[leaderTermAnnotation]), &termB) == nil
	}, func() any {
		return map[string]any{"holder": holder(t, ctx, kube, ns), "position": exPublished(t, ctx, kube, ns), "cm0": cm.ResourceVersion}
	})
	if termB.Transitions <= termA.Transitions {
		t.Fatalf("b published under term %+v; want leaseTransitions past a's %+v", termB, termA)
	}
	want := exPublished(t, ctx, kube, ns)

	// a's held requests go through: its final publish is refused.
	close(release)
	var refused string
	waitFor(t, "a's final publish refused (or written)", func() bool {
		refused = logA.find("publishes no more")
		return refused != "" || holder(t, ctx, kube, ns) != "b"
	}, func() any {
		return map[string]any{"holder": holder(t, ctx, kube, ns), "position": exPublished(t, ctx, kube, ns)}
	})
	if h, got := holder(t, ctx, kube, ns), exPublished(t, ctx, kube, ns); h != "b" || got != want {
		t.Fatalf("after a's late publish the Lease holds position %q by %q; want b's %q", got, h, want)
	}
	for _, s := range []string{fmt.Sprintf("term %d/%s", termB.Transitions, termB.Holder), fmt.Sprintf("term %d/%s", termA.Transitions, termA.Holder)} {
		if !strings.Contains(refused, s) {
			t.Errorf("a's refusal %q does not name %q", refused, s)
		}
	}
}

// leaderTermAnnotation is the position Lease's annotation of its
// writer's term (position.AnnotationTerm).
const leaderTermAnnotation = "watchjournal.io/leader-term"

type positionTerm struct {
	Holder      string `json:"holderIdentity"`
	Transitions int32  `json:"leaseTransitions"`
}

// newFenceReplica returns a replica's manager: leader election on
// sbElection (a 2 s lease), a jcache cache in its own directory, and the
// controller "mirror" with an Exact ConfigMap source whose standby
// publishes every 200 ms under identity id.
func newFenceReplica(t *testing.T, cfg *rest.Config, ns, id string, r reconcile.Reconciler, log logr.Logger) manager.Manager {
	t.Helper()
	// a's cache may still close its files after its manager returned
	// (losing leadership skips the graceful shutdown): removed at the end
	// as far as it can be.
	dir, err := os.MkdirTemp("", "exfence-"+id)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	opts := standbytest.ManagerOptions(ns, sbElection)
	opts.LeaseDuration, opts.RenewDeadline = ptr.To(2*time.Second), ptr.To(1500*time.Millisecond)
	opts.NewCache = jcache.NewFunc(jcache.Options{Dir: dir, NoSync: true, Logger: log})
	mgr, err := manager.New(cfg, opts)
	if err != nil {
		t.Fatal(err)
	}
	ex := jcache.ExactWith(mgr.GetCache(), "mirror", jcache.ExactOptions{Standby: &jcache.Standby{
		Namespace: ns, Name: sbPosition, Identity: id, Interval: 200 * time.Millisecond, LeaderElectionID: sbElection}})
	if err := ex.AddToManager(mgr); err != nil {
		t.Fatal(err)
	}
	if err := builder.ControllerManagedBy(mgr).Named("mirror").
		WatchesRawSource(ex.Kind(&corev1.ConfigMap{}, &handler.EnqueueRequestForObject{})).Complete(ex.Reconciler(r)); err != nil {
		t.Fatal(err)
	}
	return mgr
}

// electionTerm returns the term on the election Lease now.
func electionTerm(t *testing.T, ctx context.Context, kube kubernetes.Interface, ns string) positionTerm {
	t.Helper()
	l, err := kube.CoordinationV1().Leases(ns).Get(ctx, sbElection, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return positionTerm{Holder: ptr.Deref(l.Spec.HolderIdentity, ""), Transitions: ptr.Deref(l.Spec.LeaseTransitions, 0)}
}

// holder returns the position Lease's holderIdentity, "" when none.
func holder(t *testing.T, ctx context.Context, kube kubernetes.Interface, ns string) string {
	t.Helper()
	l, err := kube.CoordinationV1().Leases(ns).Get(ctx, sbPosition, metav1.GetOptions{})
	if err != nil {
		return ""
	}
	return ptr.Deref(l.Spec.HolderIdentity, "")
}

// waitFor checks cond every 50 ms until it holds, or fails after 60 s
// with what and state().
func waitFor(t *testing.T, what string, cond func() bool, state func() any) {
	t.Helper()
	deadline := time.After(60 * time.Second)
	for !cond() {
		select {
		case <-deadline:
			t.Fatalf("timed out waiting for %s; last state %v", what, state())
		case <-time.After(50 * time.Millisecond):
		}
	}
}
