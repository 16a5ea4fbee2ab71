package crsource_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/go-logr/logr/funcr"
	"github.com/go-logr/logr/testr"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	"github.com/watchjournal/watchjournal/crsource"
	"github.com/watchjournal/watchjournal/internal/testing/controlplane"
	"github.com/watchjournal/watchjournal/internal/testing/standbytest"
	"github.com/watchjournal/watchjournal/journal"
)

// replica is one process of an operator with a warm standby: its own
// journal file, a manager with leader election on a real Lease.
type replica struct {
	src  *crsource.Source
	mgr  manager.Manager
	r    *standbytest.Reader
	stop func()
}

const (
	electionLease = "mirror-leader"
	positionLease = "mirror-position"
)

// startReplica starts a replica. With cut non-nil, once cut is set, the
// source's requests to the position Lease fail, as if the process had
// died: its last publish is lost.
func startReplica(t *testing.T, cp *controlplane.ControlPlane, ns, id, path string, res journal.Resource, r *standbytest.Reader, log logr.Logger, cut *atomic.Bool) *replica {
	t.Helper()
	cfg := cp.RESTConfig()
	if cut != nil {
		cfg = standbytest.Cut(cfg, cut, positionLease)
	}
	src, err := crsource.New(cfg, crsource.Options{Path: path, Resource: res, NoSync: true,
		Loop:    crsource.LoopOptions{MinBackoff: 20 * time.Millisecond, MaxBackoff: 300 * time.Millisecond, Logger: log.WithValues("replica", id)},
		Standby: &crsource.Standby{Namespace: ns, Name: positionLease, Identity: id, Interval: 200 * time.Millisecond}})
	if err != nil {
		t.Fatal(err)
	}
	mgr, err := manager.New(cp.RESTConfig(), standbytest.ManagerOptions(ns, electionLease))
	if err != nil {
		t.Fatal(err)
	}
	if err := src.AddToManager(mgr); err != nil {
		t.Fatal(err)
	}
	if err := builder.ControllerManagedBy(mgr).Named("mirror").WatchesRawSource(src).Complete(src.Reconciler(r)); err != nil {
		t.Fatal(err)
	}
	rep := &replica{src: src, mgr: mgr, r: r}
	rep.stop = standbytest.Run(t, mgr, id, func() {
		<-src.Done()
		if err := src.Err(); err != nil {
			t.Errorf("replica %s: source Err = %v after a clean shutdown", id, err)
		}
	})
	return rep
}

// elected waits until the replica leads.
func (rep *replica) elected(t *testing.T, within time.Duration) {
	t.Helper()
	standbytest.Elected(t, rep.mgr, within)
}

// published returns the position on the position Lease, "" when none.
func published(t *testing.T, ctx context.Context, kube kubernetes.Interface, ns string) string {
	t.Helper()
	return standbytest.Annotation(t, ctx, kube, ns, positionLease, crsource.AnnotationPosition)
}

// Two replicas, each with its own journal file, under leader election on
// a real Lease. The leader (a) reconciles every object and publishes its
// position; the standby (b) keeps its journal current without
// reconciling, and follows a's position with its consumer. Mid-stream of
// changes the leader is stopped (its manager's context cancelled); the changes go on; b takes over and reconciles what
// changed after the position a published last: every change after the
// kill, and none of the 40 objects that did not change (a cold standby
// would reconcile all 71).
//
// "crash": the leader's last publish is lost (its requests to the position
// Lease fail from the kill on), so b starts from the position a published
// before, up to Interval earlier: b reconciles the changes past that one,
// a few more, still exactly those past the position on the Lease.
func TestStandby_FailoverReconcilesWhatChangedSincePublishedPosition(t *testing.T) {
	ctrllog.SetLogger(logr.Discard())
	cp := controlplane.StartT(t, controlplane.Options{})
	for _, crash := range []bool{false, true} {
		name := "graceful"
		if crash {
			name = "crash"
		}
		t.Run(name, func(t *testing.T) { testFailover(t, cp, "standby-"+name, crash) })
	}
}

func testFailover(t *testing.T, cp *controlplane.ControlPlane, ns string, crash bool) {
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	kube := kubernetes.NewForConfigOrDie(cp.RESTConfig())
	w := standbytest.NewWorkload(t, ctx, kube, ns)
	res := journal.Resource{GVR: schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}, Namespace: ns}
	dir := t.TempDir()
	log := testr.New(t)

	var cut atomic.Bool
	a := startReplica(t, cp, ns, "a", filepath.Join(dir, "a.db"), res, standbytest.NewReader(kube, ns), log, &cut)
	a.elected(t, 30*time.Second)
	b := startReplica(t, cp, ns, "b", filepath.Join(dir, "b.db"), res, standbytest.NewReader(kube, ns), log, nil)

	// a reconciles all 71 and publishes; b's journal syncs.
	a.r.Wait(t, "a reconciled all 71 and published its position", func() bool {
		return len(a.r.Names()) == standbytest.All && published(t, ctx, kube, ns) != "" && b.src.Loop().HasSynced()
	}, func() any { return map[string]any{"a": len(a.r.Names()), "position": published(t, ctx, kube, ns)} })

	// While it stands by, b commits its consumer behind a's position (so
	// retention can trim its journal): w's change, once a reconciled and
	// published it, moves b's commit past b's list (71 events).
	w.Update("w")
	a.r.Wait(t, "b's consumer following a's position past w's change", func() bool {
		c, _ := b.src.Committed()
		return c > standbytest.All
	}, func() any {
		c, _ := b.src.Committed()
		return map[string]any{"b committed": c, "position": published(t, ctx, kube, ns)}
	})
	if got := b.r.Names(); len(got) != 0 {
		t.Fatalf("the standby reconciled %v; want nothing before it leads", got)
	}

	pub := func() string { return published(t, ctx, kube, ns) }
	w.Failover(&cut, crash,
		standbytest.Replica{R: a.r, Stop: a.stop, Publish: pub},
		standbytest.Replica{R: b.r, Elected: func() { b.elected(t, 30*time.Second) }, Publish: pub})
}

// A position the new leader cannot place starts a resync: a's position is
// older than what retention left of b's journal, so b queues every key
// (and says why), not only the keys of the events it retains.
func TestStandby_PositionOlderThanRetention_Resyncs(t *testing.T) {
	ctrllog.SetLogger(logr.Discard())
	cp := controlplane.StartT(t, controlplane.Options{})
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	kube := kubernetes.NewForConfigOrDie(cp.RESTConfig())
	ns := "standby-trim"
	if _, err := kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	cms := kube.CoreV1().ConfigMaps(ns)
	const n = 20
	for i := 0; i < n; i++ {
		if _, err := cms.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("k%02d", i)}, Data: map[string]string{"v": "0"}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	res := journal.Resource{GVR: schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}, Namespace: ns}
	dir := t.TempDir()

	// a leads, reconciles all, publishes, stops.
	a := startReplica(t, cp, ns, "a", filepath.Join(dir, "a.db"), res, standbytest.NewReader(kube, ns), testr.New(t), nil)
	a.r.Wait(t, "a reconciled all and published", func() bool {
		return len(a.r.Names()) == n && published(t, ctx, kube, ns) != ""
	}, func() any { return a.r.Names() })
	a.stop()
	pos := published(t, ctx, kube, ns)

	// b's journal: its list, then 10 changes seen on its watch, all past
	// a's position; retention then trims the list and 5 of the changes.
	bpath := filepath.Join(dir, "b.db")
	bsrc, err := crsource.New(cp.RESTConfig(), crsource.Options{Path: bpath, Resource: res, NoSync: true,
		Loop: crsource.LoopOptions{MinBackoff: 20 * time.Millisecond, MaxBackoff: 300 * time.Millisecond, Logger: testr.New(t)}})
	if err != nil {
		t.Fatal(err)
	}
	lctx, lcancel := context.WithCancel(ctx)
	ran := make(chan error, 1)
	go func() { ran <- bsrc.Loop().Run(lctx) }()
	if err := bsrc.Loop().WaitForSync(ctx); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 10; i++ {
		cm, err := cms.Get(ctx, fmt.Sprintf("k%02d", i), metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		cm.Data["v"] = "1"
		if _, err := cms.Update(ctx, cm, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	if err := bsrc.Journal().Wait(ctx, n+9); err != nil {
		t.Fatal(err)
	}
	lcancel()
	if err := <-ran; err != nil {
		t.Fatal(err)
	}
	if err := bsrc.Close(); err != nil {
		t.Fatal(err)
	}
	j, err := journal.Open(bpath, &journal.Options{Resource: &res, NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	evs, err := j.Read(n+1, 1)
	if err != nil || len(evs) != 1 || evs[0].Origin != journal.OriginWatch || !standbytest.After(evs[0].ResourceVersion, pos) {
		t.Fatalf("b's first change = %+v, %v; want a watch event past a's position %s", evs, err, pos)
	}
	if trimmed, _, err := j.Writer().Trim(n+6, n+5, 0, 0); err != nil || trimmed != n+5 {
		t.Fatalf("Trim = %d, %v; want %d", trimmed, err, n+5)
	}
	if err := j.Close(); err != nil {
		t.Fatal(err)
	}

	// b leads: it cannot place a's position in what it retains.
	var logs bytes.Buffer
	var logMu sync.Mutex
	capture := funcr.New(func(prefix, args string) {
		logMu.Lock()
		fmt.Fprintln(&logs, prefix, args)
		logMu.Unlock()
	}, funcr.Options{})
	b := startReplica(t, cp, ns, "b", bpath, res, standbytest.NewReader(kube, ns), capture, nil)
	b.r.Wait(t, "b reconciled every key", func() bool { return len(b.r.Names()) == n },
		func() any { return b.r.Names() })

	// A second replica on b's file cannot start: the file is locked.
	if _, err := crsource.New(cp.RESTConfig(), crsource.Options{Path: bpath, Resource: res}); !errors.Is(err, journal.ErrLocked) {
		t.Errorf("New on a file another replica runs = %v; want journal.ErrLocked", err)
	} else {
		t.Logf("New on a file another replica runs: %v", err)
	}
	logMu.Lock()
	text := logs.String()
	logMu.Unlock()
	if !bytes.Contains([]byte(text), []byte("resync")) || !bytes.Contains([]byte(text), []byte("older than this journal's retention")) {
		t.Errorf("b's log does not say it resyncs because the position is older than its retention:\n%s", text)
	}
	for i := 0; i < n; i++ {
		name := fmt.Sprintf("k%02d", i)
		want := "0"
		if i < 10 {
			want = "1"
		}
		if got := b.r.Last(name); got != want {
			t.Errorf("b's reconcile of %s saw v=%q; want %q", name, got, want)
		}
	}
}
