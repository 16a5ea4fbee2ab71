package jcache_test

// Restart-exact delivery on the builder path (Exact), against the real
// apiserver: a controller with For (a predicate) and Owns-like sources on
// the journal cache, stopped without a last commit (as by SIGKILL),
// restarted after changes, reconciles exactly the changed keys; a
// RequeueAfter does not pin the commit and its timer survives the restart.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/go-logr/logr/testr"
	"k8s.io/client-go/util/workqueue"
	crcache "sigs.k8s.io/controller-runtime/pkg/cache"

	"github.com/watchjournal/watchjournal/internal/testing/controlplane"
	"github.com/watchjournal/watchjournal/jcache"
	"github.com/watchjournal/watchjournal/journal"
)

// mirror reconciles ConfigMaps: each gets a Secret "<name>-child" it
// controls. It records every request of namespace ns (the cache holds all
// namespaces, kube-system's ConfigMaps too) and answers with outcome (nil:
// success).
type mirror struct {
	c       client.Client
	ns      string
	outcome func(name string) (reconcile.Result, error)

	mu   sync.Mutex
	seen map[string]int
	ch   chan struct{}
}

func newMirror(ns string, outcome func(string) (reconcile.Result, error)) *mirror {
	return &mirror{ns: ns, outcome: outcome, seen: map[string]int{}, ch: make(chan struct{})}
}

func (m *mirror) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	if req.Namespace != m.ns {
		return reconcile.Result{}, nil
	}
	defer func() {
		m.mu.Lock()
		m.seen[req.Name]++
		close(m.ch)
		m.ch = make(chan struct{})
		m.mu.Unlock()
	}()
	var cm corev1.ConfigMap
	if err := m.c.Get(ctx, req.NamespacedName, &cm); err != nil {
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	if m.outcome == nil {
		s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: cm.Namespace, Name: cm.Name + "-child"}, StringData: map[string]string{"k": "v"}}
		if err := controllerutil.SetControllerReference(&cm, s, m.c.Scheme()); err != nil {
			return reconcile.Result{}, err
		}
		if err := m.c.Create(ctx, s); err != nil && !apierrors.IsAlreadyExists(err) {
			return reconcile.Result{}, err
		}
		return reconcile.Result{}, nil
	}
	return m.outcome(req.Name)
}

func (m *mirror) names() []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []string
	for n := range m.seen {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

func (m *mirror) count(name string) int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.seen[name]
}

// waitUntil checks cond after every reconcile and every 100 ms (commits
// are written by another goroutine) until it holds, or fails after 60 s.
func (m *mirror) waitUntil(t *testing.T, what string, cond func() bool, state func() any) {
	t.Helper()
	deadline := time.After(60 * time.Second)
	for !cond() {
		m.mu.Lock()
		ch := m.ch
		m.mu.Unlock()
		select {
		case <-ch:
		case <-time.After(100 * time.Millisecond):
		case <-deadline:
			t.Fatalf("timed out waiting for %s; state %v", what, state())
		}
	}
}

// waitAtHead waits as waitUntil until every source of srcs has committed
// its file's head and cond holds, printing the names reconciled and the
// sources.
func (m *mirror) waitAtHead(t *testing.T, what string, cond func() bool, srcs ...*jcache.ExactSource) {
	t.Helper()
	m.waitUntil(t, what, func() bool {
		ok, _ := atHead(srcs...)
		return ok && cond()
	}, func() any { _, s := atHead(srcs...); return fmt.Sprint(m.names(), s) })
}

// atHead reports whether every source has synced and committed its file's
// head, and describes them.
func atHead(srcs ...*jcache.ExactSource) (bool, string) {
	ok := true
	var b strings.Builder
	for _, s := range srcs {
		j := s.Journal()
		if j == nil {
			return false, "not started"
		}
		c, err := s.Committed()
		h, herr := j.Head()
		if err != nil || herr != nil {
			return false, fmt.Sprint(err, herr)
		}
		fmt.Fprintf(&b, "%s committed %d head %d; ", s.Consumer(), c, h)
		ok = ok && c == h && h > 0
	}
	return ok, b.String()
}

// startExact runs a manager on the journal cache in dir with the
// controller "mirror" that build makes, as a new process would; stop
// cancels it and waits.
func startExact(t *testing.T, cp *controlplane.ControlPlane, dir string, build func(manager.Manager, *jcache.ExactController) error) (stop func()) {
	t.Helper()
	return startManager(t, cp, dir, func(mgr manager.Manager) error {
		// Stops as by SIGKILL: no last commit.
		return build(mgr, jcache.ExactWith(mgr.GetCache(), "mirror", jcache.NoFinalCommit(jcache.ExactOptions{})))
	})
}

// secretMeta is the owned type: Secrets, metadata only (a cache keeps a
// Secret's data only sealed, with a key).
func secretMeta() *metav1.PartialObjectMetadata {
	return &metav1.PartialObjectMetadata{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Secret"}}
}

// TestExact_BuilderRestartReconcilesOnlyChanges: For(ConfigMap) with a predicate (label skip=yes filtered), the
// owned Secrets through EnqueueRequestForOwner and ServiceAccounts through
// a map function, all Exact sources on the cache's files. Stopped without
// a last commit; while down 5 of 20 ConfigMaps change, 2 are deleted, one
// owned Secret changes, a ServiceAccount mapping to a ConfigMap is
// created, a filtered ConfigMap changes, and etcd is compacted (the
// restart relists: the deletes are inferred). The restart reconciles
// exactly the 5 + 2 + the Secret's owner + the mapped one, not the 20.
func TestExact_BuilderRestartReconcilesOnlyChanges(t *testing.T) {
	cp, kube, ns := setup(t)
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	const n = 20
	for i := range n {
		createCM(t, kube, ns, fmt.Sprintf("cm%02d", i), nil, map[string]string{"v": "0"})
	}
	for i := range 3 {
		createCM(t, kube, ns, fmt.Sprintf("skip%d", i), map[string]string{"skip": "yes"}, nil)
	}
	notSkipped := predicate.NewPredicateFuncs(func(o client.Object) bool { return o.GetLabels()["skip"] != "yes" })
	// seen records, per ConfigMap of ns, the last update or delete event
	// the For source gave its predicates: the old object of an update and
	// the last object of a delete come from the journal.
	var seenMu sync.Mutex
	seen := map[string]string{}
	recordEvents := predicate.Funcs{
		UpdateFunc: func(e event.UpdateEvent) bool {
			o, n := e.ObjectOld.(*corev1.ConfigMap), e.ObjectNew.(*corev1.ConfigMap)
			if n.Namespace == ns {
				seenMu.Lock()
				seen[n.Name] = fmt.Sprintf("update v=%s -> v=%s", o.Data["v"], n.Data["v"])
				seenMu.Unlock()
			}
			return true
		},
		DeleteFunc: func(e event.DeleteEvent) bool {
			if o := e.Object.(*corev1.ConfigMap); o.Namespace == ns {
				seenMu.Lock()
				seen[o.Name] = fmt.Sprintf("delete unknown=%v v=%s", e.DeleteStateUnknown, o.Data["v"])
				seenMu.Unlock()
			}
			return true
		},
	}
	// ServiceAccounts "for-<name>" map to ConfigMap <name> (Watches with a
	// map function).
	bySA := handler.EnqueueRequestsFromMapFunc(func(_ context.Context, o client.Object) []reconcile.Request {
		name, ok := strings.CutPrefix(o.GetName(), "for-")
		if !ok || o.GetNamespace() != ns {
			return nil
		}
		return []reconcile.Request{{NamespacedName: types.NamespacedName{Namespace: ns, Name: name}}}
	})
	if _, err := kube.CoreV1().ServiceAccounts(ns).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "for-cm15"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	var forSrc, ownsSrc, saSrc *jcache.ExactSource
	build := func(r *mirror) func(manager.Manager, *jcache.ExactController) error {
		return func(mgr manager.Manager, ex *jcache.ExactController) error {
			r.c = mgr.GetClient()
			forSrc = ex.Kind(&corev1.ConfigMap{}, &handler.EnqueueRequestForObject{}, recordEvents, notSkipped)
			ownsSrc = ex.Kind(secretMeta(), handler.EnqueueRequestForOwner(mgr.GetScheme(), mgr.GetRESTMapper(), &corev1.ConfigMap{}, handler.OnlyControllerOwner()))
			saSrc = ex.Kind(&corev1.ServiceAccount{}, bySA)
			return ctrl.NewControllerManagedBy(mgr).Named("mirror").
				WatchesRawSource(forSrc).
				WatchesRawSource(ownsSrc).
				WatchesRawSource(saSrc).
				Complete(ex.Reconciler(r))
		}
	}

	// First process: every ConfigMap but the skipped is reconciled once
	// its Secret exists; both sources commit their heads.
	r1 := newMirror(ns, nil)
	stop := startExact(t, cp, dir, build(r1))
	r1.waitUntil(t, "20 reconciled, 20 Secrets, both sources at their heads", func() bool {
		if len(r1.names()) < n {
			return false
		}
		ok, _ := atHead(forSrc, ownsSrc, saSrc)
		if !ok {
			return false
		}
		idx, err := ownsSrc.Journal().ScanIndex("", 1000)
		return err == nil && len(idx) == n
	}, func() any { _, s := atHead(forSrc, ownsSrc, saSrc); return fmt.Sprint(r1.names(), s) })
	for _, name := range r1.names() {
		if strings.HasPrefix(name, "skip") {
			t.Errorf("%s reconciled: the predicate filters it", name)
		}
	}
	if !strings.HasPrefix(forSrc.Consumer(), "exact/mirror/v1/ConfigMap") || !strings.HasPrefix(ownsSrc.Consumer(), "exact/mirror/v1/Secret") {
		t.Errorf("consumers %q, %q; want exact/mirror/v1/ConfigMap, exact/mirror/v1/Secret", forSrc.Consumer(), ownsSrc.Consumer())
	}
	stop()

	// Down: 5 changed, 2 deleted, cm10's Secret changed, a skipped one
	// changed; etcd compacted.
	want := map[string]bool{}
	for i := range 5 {
		name := fmt.Sprintf("cm%02d", i)
		if _, err := kube.CoreV1().ConfigMaps(ns).Update(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns}, Data: map[string]string{"v": "1"}}, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
		want[name] = true
	}
	for _, name := range []string{"cm18", "cm19"} {
		if err := kube.CoreV1().ConfigMaps(ns).Delete(ctx, name, metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		want[name] = true
	}
	if _, err := kube.CoreV1().Secrets(ns).Patch(ctx, "cm10-child", types.MergePatchType, []byte(`{"metadata":{"labels":{"touched":"yes"}}}`), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	want["cm10"] = true
	if _, err := kube.CoreV1().ServiceAccounts(ns).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "for-cm12"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	want["cm12"] = true
	patchCM(t, ctx, kube, ns, "skip0", "1")
	if _, err := cp.Compact(ctx); err != nil {
		t.Fatal(err)
	}

	// Second process: exactly the changed keys.
	seenMu.Lock()
	clear(seen)
	seenMu.Unlock()
	r2 := newMirror(ns, nil)
	stop = startExact(t, cp, dir, build(r2))
	defer stop()
	r2.waitAtHead(t, "the changed keys reconciled, the sources at their heads", func() bool { return len(r2.names()) >= len(want) }, forSrc, ownsSrc, saSrc)
	var wantNames []string
	for k := range want {
		wantNames = append(wantNames, k)
	}
	sort.Strings(wantNames)
	if got := r2.names(); strings.Join(got, ",") != strings.Join(wantNames, ",") {
		t.Fatalf("after the restart reconciled %v; want exactly %v (of %d)", got, wantNames, n)
	}
	// The events behind them: updates with the complete old object, the
	// deletes the relist inferred with DeleteStateUnknown and the last
	// object.
	seenMu.Lock()
	defer seenMu.Unlock()
	for i := range 5 {
		name := fmt.Sprintf("cm%02d", i)
		if got, want := seen[name], "update v=0 -> v=1"; got != want {
			t.Errorf("%s: event %q; want %q", name, got, want)
		}
	}
	for _, name := range []string{"cm18", "cm19"} {
		if got, want := seen[name], "delete unknown=true v=0"; got != want {
			t.Errorf("%s: event %q; want %q", name, got, want)
		}
	}
}

// TestExact_RequeueAfterDoesNotPin: "tick" always asks
// to be looked at again in 300 ms, "slow" in an hour: the commit still
// reaches the head. A restart with nothing changed reconciles the due
// timer (tick) and nothing else: not slow (not due), not the others.
func TestExact_RequeueAfterDoesNotPin(t *testing.T) {
	cp, kube, ns := setup(t)
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	for _, name := range []string{"a", "b", "c", "slow", "tick"} {
		createCM(t, kube, ns, name, nil, nil)
	}
	outcome := func(name string) (reconcile.Result, error) {
		switch name {
		case "tick":
			return reconcile.Result{RequeueAfter: 300 * time.Millisecond}, nil
		case "slow":
			return reconcile.Result{RequeueAfter: time.Hour}, nil
		}
		return reconcile.Result{}, nil
	}
	dir := t.TempDir()
	var src *jcache.ExactSource
	build := func(r *mirror) func(manager.Manager, *jcache.ExactController) error {
		return func(mgr manager.Manager, ex *jcache.ExactController) error {
			r.c = mgr.GetClient()
			src = ex.Kind(&corev1.ConfigMap{}, &handler.EnqueueRequestForObject{})
			return ctrl.NewControllerManagedBy(mgr).Named("mirror").WatchesRawSource(src).Complete(ex.Reconciler(r))
		}
	}
	r1 := newMirror(ns, outcome)
	stop := startExact(t, cp, dir, build(r1))
	r1.waitAtHead(t, "all reconciled, tick three times, the commit at the head", func() bool { return len(r1.names()) == 5 && r1.count("tick") >= 3 }, src)
	// Later changes commit too: tick's timer pins nothing.
	createCM(t, kube, ns, "d", nil, nil)
	r1.waitAtHead(t, "d reconciled and committed", func() bool { return r1.count("d") > 0 }, src)
	stop()

	// The timers file holds both timers; wait until tick's is due.
	b, err := os.ReadFile(filepath.Join(dir, "exact.mirror.timers"))
	if err != nil {
		t.Fatal(err)
	}
	var f struct {
		Timers []struct {
			Name string
			Due  time.Time
		}
	}
	if err := json.Unmarshal(b, &f); err != nil {
		t.Fatal(err)
	}
	due := map[string]time.Time{}
	for _, e := range f.Timers {
		due[e.Name] = e.Due
	}
	if len(due) != 2 || due["tick"].IsZero() || time.Until(due["slow"]) < 50*time.Minute {
		t.Fatalf("timers file %s; want tick and slow (due in about an hour)", b)
	}
	time.Sleep(time.Until(due["tick"])) // the condition is the clock

	r2 := newMirror(ns, outcome)
	stop = startExact(t, cp, dir, build(r2))
	defer stop()
	r2.waitUntil(t, "tick's timer fired", func() bool { return r2.count("tick") > 0 }, func() any { return r2.names() })
	// A change after the start: once it is reconciled and committed,
	// whatever the restart queued from the journal has been reconciled.
	patchCM(t, ctx, kube, ns, "a", "1")
	r2.waitAtHead(t, "a reconciled and committed", func() bool { return r2.count("a") > 0 }, src)
	if got := r2.names(); strings.Join(got, ",") != "a,tick" {
		t.Fatalf("after a restart with nothing changed but a (after the start) reconciled %v; want a (changed) and tick (timer due), not slow (due in an hour)", got)
	}
}

// TestExact_UnwrappedReconciler_ManagerStartFails: a controller given its
// reconciler unwrapped fails to start with ErrExactNotWrapped, which names
// the fix, before reconciling anything.
func TestExact_UnwrappedReconciler_ManagerStartFails(t *testing.T) {
	cp, kube, ns := setup(t)
	createCM(t, kube, ns, "a", nil, nil)
	mgr := newManager(t, cp.RESTConfig(), ctrl.Options{
		NewCache: jcache.NewFunc(jcache.Options{Dir: t.TempDir(), NoSync: true, Logger: testr.New(t)}),
	})
	r := newMirror(ns, nil)
	r.c = mgr.GetClient()
	ex := jcache.Exact(mgr.GetCache(), "unwrapped")
	if err := ctrl.NewControllerManagedBy(mgr).Named("unwrapped").
		WatchesRawSource(ex.Kind(&corev1.ConfigMap{}, &handler.EnqueueRequestForObject{})).
		Complete(r); err != nil { // the mistake
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	err := mgr.Start(ctx)
	if !errors.Is(err, jcache.ErrExactNotWrapped) || !strings.Contains(err.Error(), "Complete(ex.Reconciler(r))") {
		t.Fatalf("manager Start = %v; want ErrExactNotWrapped naming Complete(ex.Reconciler(r))", err)
	}
	if got := r.names(); len(got) != 0 {
		t.Errorf("reconciled %v before the controller failed; want none", got)
	}
}

// byHand runs an Exact source of ConfigMaps on cache c with a workqueue
// and one worker calling the wrapped reconciler, which records the names
// of namespace ns; stop ends both.
type byHand struct {
	src  *jcache.ExactSource
	rec  *mirror
	stop func()
}

func runByHand(t *testing.T, c crcache.Cache, ns string) *byHand {
	return runByHandWith(t, c, ns, func(string) (reconcile.Result, error) { return reconcile.Result{}, nil }, jcache.ExactOptions{})
}

// runByHandWith is runByHand whose reconciler answers with outcome, its
// controller built with opts.
func runByHandWith(t *testing.T, c crcache.Cache, ns string, outcome func(string) (reconcile.Result, error), opts jcache.ExactOptions) *byHand {
	t.Helper()
	ex := jcache.ExactWith(c, "mirror", opts)
	src := ex.Kind(&corev1.ConfigMap{}, &handler.EnqueueRequestForObject{})
	rec := newMirror(ns, outcome)
	r := ex.Reconciler(reconcile.Func(func(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
		if req.Namespace != ns {
			return reconcile.Result{}, nil
		}
		return rec.outcome(req.Name)
	}))
	ctx, cancel := context.WithCancel(context.Background())
	q := workqueue.NewTypedRateLimitingQueue(workqueue.DefaultTypedControllerRateLimiter[reconcile.Request]())
	if err := src.Start(ctx, q); err != nil {
		t.Fatal(err)
	}
	wctx, wcancel := context.WithTimeout(ctx, 60*time.Second)
	defer wcancel()
	if err := src.WaitForSync(wctx); err != nil {
		t.Fatal(err)
	}
	worker := make(chan struct{})
	go func() {
		defer close(worker)
		for {
			req, shutdown := q.Get()
			if shutdown {
				return
			}
			if req.Namespace == ns {
				rec.mu.Lock()
				rec.seen[req.Name]++
				close(rec.ch)
				rec.ch = make(chan struct{})
				rec.mu.Unlock()
			}
			if _, err := r.Reconcile(ctx, req); err != nil {
				q.AddRateLimited(req)
			} else {
				q.Forget(req)
			}
			q.Done(req)
		}
	}()
	return &byHand{src: src, rec: rec, stop: func() {
		cancel()
		q.ShutDown()
		<-worker
		<-src.Done()
	}}
}

// A consumer that retention's hard cap trimmed past (its events are gone)
// is resynchronized as an informer relists: a create event for every
// object, not only the changed ones (a few at a time: MaxPending), and a
// log line that says so; the commit then reaches the head.
func TestExact_TrimmedConsumerResyncs(t *testing.T) {
	cp, kube, ns := setup(t)
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	all := createNumbered(t, kube, ns, 10)
	dir := t.TempDir()

	// First run: every object, the commit at the head.
	rc := startCache(t, jcache.NewFunc(jcache.WithRetentionInterval(jcache.Options{Dir: dir, NoSync: true, Logger: testr.New(t)}, 50*time.Millisecond)), crcache.Options{}, cp)
	h := runByHand(t, rc.c, ns)
	h.waitEveryObjectAtHead(t, "the first run", all)
	committed, _ := h.src.Committed()
	h.stop()
	rc.stop()

	// Down: three objects change, each ten times with 2 KiB of data.
	patchBig(ctx, t, kube, ns, all[:3])

	// Second run, with a hard cap of 8 KiB: the informer's loop journals
	// the 30 changes and retention trims past the consumer before the
	// source starts.
	var logged logLines
	rc = startCache(t, jcache.NewFunc(jcache.WithRetentionInterval(jcache.Options{Dir: dir, NoSync: true, Logger: logged.logger(),
		Retention: &journal.Retention{HardMaxBytes: 8 << 10}}, 50*time.Millisecond)), crcache.Options{}, cp)
	defer rc.stop()
	getInformer(t, ctx, rc.c, &corev1.ConfigMap{})
	waitFirstRetained(t, dir, "configmaps.", committed+2)
	// MaxPending 3: the replay queues its 10 objects 3 at a time.
	h = runByHandWith(t, rc.c, ns, func(string) (reconcile.Result, error) { return reconcile.Result{}, nil }, jcache.ExactOptions{MaxPending: 3})
	defer h.stop()
	h.waitEveryObjectAtHead(t, "after the trim", all)
	if logged.find("retention trimmed events this consumer had not committed") == "" {
		t.Fatalf("no log line says the consumer was trimmed past; logged %d lines", len(logged.all()))
	}
}

// A new Exact consumer (a controller name the file has not seen) on a
// file whose retention already trimmed the first events starts from every
// stored object, not from the first retained event: the keys whose only
// events were trimmed are reconciled too.
func TestExact_NewConsumerOnTrimmedFileReconcilesEveryObject(t *testing.T) {
	cp, kube, ns := setup(t)
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	const n = 10
	all := createNumbered(t, kube, ns, n)
	dir := t.TempDir()
	rc := startCache(t, jcache.NewFunc(jcache.WithRetentionInterval(jcache.Options{Dir: dir, NoSync: true, Logger: testr.New(t),
		Retention: &journal.Retention{HardMaxBytes: 8 << 10}}, 50*time.Millisecond)), crcache.Options{}, cp)
	defer rc.stop()
	getInformer(t, ctx, rc.c, &corev1.ConfigMap{})
	// Three objects change ten times with 2 KiB each: the hard cap trims
	// the first list's n+1 events (kube-root-ca.crt too), the only events
	// of cm03..cm09.
	patchBig(ctx, t, kube, ns, all[:3])
	waitFirstRetained(t, dir, "configmaps.", n+2)

	h := runByHandWith(t, rc.c, ns, func(string) (reconcile.Result, error) { return reconcile.Result{}, nil }, jcache.ExactOptions{MaxPending: 3})
	defer h.stop()
	h.waitEveryObjectAtHead(t, "a new consumer on the trimmed file", all)
}

// waitFirstRetained waits until retention trimmed the file of dir whose
// name starts with prefix up to at least offset first (its first retained
// offset is first or more).
func waitFirstRetained(t *testing.T, dir, prefix string, first uint64) {
	t.Helper()
	if err := untilFirstRetained(dir, prefix, first); err != nil {
		t.Fatal(err)
	}
}

// untilFirstRetained is waitFirstRetained for any goroutine: it returns
// an error after 60 s.
func untilFirstRetained(dir, prefix string, first uint64) error {
	deadline := time.After(60 * time.Second)
	for {
		offs, err := jcache.FileOffsets(dir)
		if err != nil {
			return err
		}
		for name, o := range offs {
			if strings.HasPrefix(name, prefix) && o[0] >= first {
				return nil
			}
		}
		select {
		case <-deadline:
			return fmt.Errorf("retention did not trim the %s file to offset %d: %v", prefix, first, offs)
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// consumersNamed returns the consumers of src's file whose names start
// with prefix.
func consumersNamed(t *testing.T, src *jcache.ExactSource, prefix string) []journal.ConsumerInfo {
	t.Helper()
	cs, err := src.Journal().Consumers().List()
	if err != nil {
		t.Fatal(err)
	}
	var out []journal.ConsumerInfo
	for _, c := range cs {
		if strings.HasPrefix(c.Name, prefix) {
			out = append(out, c)
		}
	}
	return out
}

// createNumbered creates n ConfigMaps cm00, cm01, … in ns and returns
// their names in order.
func createNumbered(t *testing.T, kube kubernetes.Interface, ns string, n int) []string {
	t.Helper()
	var all []string
	for i := range n {
		all = append(all, fmt.Sprintf("cm%02d", i))
		createCM(t, kube, ns, all[i], nil, nil)
	}
	return all
}

// patchBig changes each of names ten times with 2 KiB of data.
func patchBig(ctx context.Context, t *testing.T, kube kubernetes.Interface, ns string, names []string) {
	t.Helper()
	big := strings.Repeat("x", 2048)
	for round := range 10 {
		for _, name := range names {
			patch := fmt.Sprintf(`{"data":{"v":"%d-%s"}}`, round, big)
			if _, err := kube.CoreV1().ConfigMaps(ns).Patch(ctx, name, types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
				t.Fatal(err)
			}
		}
	}
}

// waitEveryObjectAtHead waits until h reconciled exactly the names all
// and committed up to the head; what names the run in the failure.
func (h *byHand) waitEveryObjectAtHead(t *testing.T, what string, all []string) {
	t.Helper()
	h.rec.waitAtHead(t, "every object reconciled, the commit at the head", func() bool { return len(h.rec.names()) == len(all) }, h.src)
	if got := h.rec.names(); strings.Join(got, ",") != strings.Join(all, ",") {
		t.Fatalf("%s reconciled %v; want every object %v", what, got, all)
	}
}

// The first start's replay is crash-safe: the consumer is created only by
// the commit after every replayed request reconciled, so a process that
// stops before that (here cm02 keeps failing) replays every object again.
func TestExact_InterruptedReplayReplaysAgain(t *testing.T) {
	cp, kube, ns := setup(t)
	const n = 5
	all := createNumbered(t, kube, ns, n)
	dir := t.TempDir()
	rc := startCache(t, jcache.NewFunc(jcache.Options{Dir: dir, NoSync: true, Logger: testr.New(t)}), crcache.Options{}, cp)
	h := runByHandWith(t, rc.c, ns, func(name string) (reconcile.Result, error) {
		if name == "cm02" {
			return reconcile.Result{}, errors.New("not yet")
		}
		return reconcile.Result{}, nil
	}, jcache.NoFinalCommit(jcache.ExactOptions{})) // stops as by SIGKILL: no last commit
	h.rec.waitUntil(t, "every object reconciled, cm02 retried", func() bool {
		return len(h.rec.names()) == n && h.rec.count("cm02") > 1
	}, func() any { return h.rec.names() })
	for _, c := range consumersNamed(t, h.src, "exact/") {
		t.Fatalf("consumer %s (committed %d) exists while cm02 of the replay has not reconciled", c.Name, c.Committed)
	}
	h.stop()
	rc.stop()

	rc = startCache(t, jcache.NewFunc(jcache.Options{Dir: dir, NoSync: true, Logger: testr.New(t)}), crcache.Options{}, cp)
	defer rc.stop()
	h = runByHand(t, rc.c, ns)
	defer h.stop()
	h.rec.waitAtHead(t, "every object reconciled again, the commit at the head", func() bool { return len(h.rec.names()) == n }, h.src)
	if got := h.rec.names(); strings.Join(got, ",") != strings.Join(all, ",") {
		t.Fatalf("after the interrupted replay reconciled %v; want every object %v", got, all)
	}
}
