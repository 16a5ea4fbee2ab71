package jcache_test

// Deletes made while the operator was down reach the builder's ordinary
// handlers (For) and a raw handler after the restart, without Exact: after
// a graceful stop, a SIGKILL-like one, an etcd compaction (the restart
// relists), and with retention trimming off.

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr/testr"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	toolscache "k8s.io/client-go/tools/cache"
	ctrl "sigs.k8s.io/controller-runtime"
	crcache "sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/watchjournal/watchjournal/internal/testing/controlplane"
	"github.com/watchjournal/watchjournal/jcache"
	"github.com/watchjournal/watchjournal/journal"
)

// outcomes is a For(ConfigMap) reconciler that records, per name, how
// often it found the ConfigMap and how often it got NotFound.
type outcomes struct {
	mgr      manager.Manager
	mu       sync.Mutex
	found    map[string]int
	notFound map[string]int
	changed  chan struct{}
}

func newOutcomes() *outcomes {
	return &outcomes{found: map[string]int{}, notFound: map[string]int{}, changed: make(chan struct{})}
}

func (o *outcomes) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	var cm corev1.ConfigMap
	err := o.mgr.GetClient().Get(ctx, req.NamespacedName, &cm)
	if err != nil && !apierrors.IsNotFound(err) {
		return reconcile.Result{}, err
	}
	o.mu.Lock()
	if err != nil {
		o.notFound[req.Name]++
	} else {
		o.found[req.Name]++
	}
	close(o.changed)
	o.changed = make(chan struct{})
	o.mu.Unlock()
	return reconcile.Result{}, nil
}

// waitUntil waits until cond holds for the outcomes; on timeout it prints
// the last outcomes seen.
func (o *outcomes) waitUntil(t *testing.T, what string, cond func(found, notFound map[string]int) bool) {
	t.Helper()
	deadline := time.After(60 * time.Second)
	for {
		o.mu.Lock()
		ok, ch := cond(o.found, o.notFound), o.changed
		state := fmt.Sprintf("found %v, not found %v", o.found, o.notFound)
		o.mu.Unlock()
		if ok {
			return
		}
		select {
		case <-ch:
		case <-deadline:
			t.Fatalf("timed out waiting for %s; last seen: %s", what, state)
		}
	}
}

// runOutcomes starts a manager on the journal cache in dir with one
// controller, For(ConfigMap) reconciled by o; stop cancels it and waits.
func runOutcomes(t *testing.T, cp *controlplane.ControlPlane, o jcache.Options, rec *outcomes) (mgr manager.Manager, stop func()) {
	t.Helper()
	o.Logger = testr.New(t)
	mgr = newManager(t, cp.RESTConfig(), ctrl.Options{NewCache: jcache.NewFunc(o)})
	rec.mgr = mgr
	if err := ctrl.NewControllerManagedBy(mgr).Named("outcomes").For(&corev1.ConfigMap{}).Complete(rec); err != nil {
		t.Fatal(err)
	}
	return mgr, runManager(t, mgr).stop
}

// uidRecorder is a raw handler that records each call as "add NAME UID"
// or "unknown NAME UID" (a DeletedFinalStateUnknown) or "delete NAME UID".
type uidRecorder struct{ *recorder }

func uidString(o any) string {
	if d, ok := o.(toolscache.DeletedFinalStateUnknown); ok {
		return "unknown " + uidString(d.Obj)
	}
	cm := o.(*corev1.ConfigMap)
	return cm.Name + " " + string(cm.UID)
}

func (r *uidRecorder) OnAdd(o any, _ bool) { r.add("add " + uidString(o)) }
func (r *uidRecorder) OnUpdate(_, o any)   { r.add("update " + uidString(o)) }
func (r *uidRecorder) OnDelete(o any) {
	if _, ok := o.(toolscache.DeletedFinalStateUnknown); ok {
		r.add(uidString(o))
		return
	}
	r.add("delete " + uidString(o))
}

// downCase is one way the operator goes down and comes back.
type downCase struct {
	crash     bool // no final commit: a SIGKILL-like stop
	compact   bool // etcd compacted while down: the restart relists
	retention *journal.Retention
}

// testDeletesWhileDown: 30 ConfigMaps, all reconciled; the manager stops
// (crash: once the rounds recorded the handlers at the head, with no last
// commit);
// while it is down 5 are deleted, 5 deleted and created again under the
// same name (a new UID), 5 updated (crash: then a cache without
// handlers runs and stops); the manager restarts on the same
// directory. The reconciler sees every deleted name as NotFound, and a
// raw handler added to the restarted cache's informer gets a
// DeletedFinalStateUnknown for each deleted object (the 5 deleted, the 5
// recreated with their old UID, before their new UID's OnAdd), and OnAdd
// of every other object.
func testDeletesWhileDown(t *testing.T, dc downCase) {
	cp, kube, ns := setup(t)
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	opts := jcache.Options{Dir: t.TempDir(), NoSync: true, Retention: dc.retention}
	run := opts // the manager's processes
	if dc.crash {
		run = jcache.NoRetainFinalCommit(opts) // they stop as by SIGKILL: no last commit of the hold
	}
	name := func(i int) string { return fmt.Sprintf("cm%02d", i) }
	uids := map[string]types.UID{}
	for i := range 30 {
		uids[name(i)] = createCM(t, kube, ns, name(i), nil, map[string]string{"v": "1"}).UID
	}
	first := newOutcomes()
	_, stop := runOutcomes(t, cp, run, first)
	first.waitUntil(t, "all 30 reconciled", func(found, _ map[string]int) bool {
		for i := range 30 {
			if found[name(i)] == 0 {
				return false
			}
		}
		return true
	})
	if dc.crash {
		// A record past the first list, committed by a round, not by
		// the stop.
		waitRecord(t, opts.Dir, "the handlers' record at the head", func(committed, head uint64) bool { return committed >= 30 && committed == head })
	}
	stop()

	// While down.
	deleted, recreated := map[string]bool{}, map[string]types.UID{}
	for i := range 15 {
		n := name(i)
		switch {
		case i < 10:
			if err := kube.CoreV1().ConfigMaps(ns).Delete(ctx, n, metav1.DeleteOptions{}); err != nil {
				t.Fatal(err)
			}
			deleted[n] = true
			if i >= 5 {
				recreated[n] = createCM(t, kube, ns, n, nil, map[string]string{"v": "new"}).UID
			}
		default:
			patchCM(t, ctx, kube, ns, n, "2")
		}
	}
	if dc.compact {
		if _, err := cp.Compact(ctx); err != nil {
			t.Fatal(err)
		}
	}

	if dc.crash {
		// A process whose informer gets no handler, stopped gracefully
		// (its last commit included): it journals the changes but must
		// not record them as given.
		r := startCache(t, jcache.NewFunc(opts), crcache.Options{}, cp)
		getInformer(t, ctx, r.c, &corev1.ConfigMap{})
		r.stop()
	}

	second := newOutcomes()
	mgr, stop := runOutcomes(t, cp, run, second)
	defer stop()
	second.waitUntil(t, "every name deleted while down reconciled as NotFound", func(_, notFound map[string]int) bool {
		for i := range 5 {
			if notFound[name(i)] == 0 {
				return false
			}
		}
		return true
	})

	raw := &uidRecorder{recorder: newRecorder()}
	reg := addHandler(t, ctx, mgr.GetCache(), &corev1.ConfigMap{}, raw)
	if !toolscache.WaitForCacheSync(ctx.Done(), reg.HasSynced) {
		t.Fatal("the raw handler did not sync")
	}
	raw.mu.Lock()
	evs := append([]string(nil), raw.events...)
	raw.mu.Unlock()
	at := map[string]int{}
	for i, e := range evs {
		if _, seen := at[e]; !seen {
			at[e] = i
		}
	}
	var bad []string
	for i := range 30 {
		n := name(i)
		old := "unknown " + n + " " + string(uids[n])
		switch {
		case recreated[n] != "":
			add := "add " + n + " " + string(recreated[n])
			if _, ok := at[old]; !ok {
				bad = append(bad, "no "+old)
			} else if a, ok := at[add]; !ok || a < at[old] {
				bad = append(bad, fmt.Sprintf("%q not after %q", add, old))
			}
		case deleted[n]:
			if _, ok := at[old]; !ok {
				bad = append(bad, "no "+old)
			}
		default:
			if _, ok := at["add "+n+" "+string(uids[n])]; !ok {
				bad = append(bad, "no add of "+n)
			}
		}
	}
	for _, e := range evs {
		if strings.HasPrefix(e, "unknown ") {
			n := strings.Fields(e)[1]
			if !deleted[n] {
				bad = append(bad, "a delete of "+n+", which was not deleted")
			}
		}
	}
	if len(bad) > 0 {
		sort.Strings(bad)
		t.Fatalf("the raw handler after the restart: %s; got %q", strings.Join(bad, "; "), evs)
	}
}

// waitRecord waits until cond holds for the handlers' record and the
// head of the one open file in dir.
func waitRecord(t *testing.T, dir, what string, cond func(committed, head uint64) bool) {
	t.Helper()
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	deadline := time.After(60 * time.Second)
	for {
		committed, head, err := jcache.HandlersRecord(dir)
		if err == nil && cond(committed, head) {
			return
		}
		select {
		case <-tick.C:
		case <-deadline:
			t.Fatalf("timed out waiting for %s: record %d, head %d, %v", what, committed, head, err)
		}
	}
}

func TestCatchUp_DeletesWhileDownAfterGracefulStop(t *testing.T) {
	testDeletesWhileDown(t, downCase{})
}

func TestCatchUp_DeletesWhileDownAfterCrash(t *testing.T) {
	testDeletesWhileDown(t, downCase{crash: true})
}

func TestCatchUp_DeletesWhileDownAndCompactedRelist(t *testing.T) {
	testDeletesWhileDown(t, downCase{compact: true})
}

func TestCatchUp_DeletesWhileDownTrimmingOff(t *testing.T) {
	testDeletesWhileDown(t, downCase{retention: &journal.Retention{}})
}

// heldHandler is a raw handler whose first OnAdd waits until its hold is
// released; it records calls as uidRecorder does.
type heldHandler struct {
	*uidRecorder
	once sync.Once
	hold *hold
}

func (g *heldHandler) OnAdd(o any, initial bool) {
	g.once.Do(g.hold.wait)
	g.uidRecorder.OnAdd(o, initial)
}

// TestCatchUp_DeleteDuringTheReplay: after a restart, a handler's replay
// (chunks of 2 objects) is held in its first chunk while the last key,
// which the previous process's handler was given, is deleted and the
// delete journaled; the chunks after it are read at heads past the
// delete, so neither the replay nor the follow (which skips what those
// chunks cover) shows it: the catch-up of that chunk must.
func TestCatchUp_DeleteDuringTheReplay(t *testing.T) {
	cp, kube, ns := setup(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	dir := t.TempDir()
	opts := jcache.Options{Dir: dir, NoSync: true, Logger: testr.New(t)}
	for i := range 30 {
		createCM(t, kube, ns, fmt.Sprintf("cm%02d", i), nil, nil)
	}
	last := createCM(t, kube, ns, "zz-last", nil, nil)
	r1 := startCache(t, jcache.NewFunc(opts), crcache.Options{}, cp)
	rec := &uidRecorder{recorder: newRecorder()}
	addHandler(t, ctx, r1.c, &corev1.ConfigMap{}, rec)
	rec.waitFor(t, "zz-last given", hasAll("add zz-last "+string(last.UID)))
	r1.stop()

	r2 := startCache(t, jcache.NewFunc(jcache.WithReplayChunk(opts, 2)), crcache.Options{}, cp)
	defer r2.stop()
	inf := getInformer(t, ctx, r2.c, &corev1.ConfigMap{})
	g := &heldHandler{uidRecorder: &uidRecorder{recorder: newRecorder()}, hold: newHold()}
	defer g.hold.release() // before r2.stop: the held OnAdd returns
	reg, err := inf.AddEventHandler(g)
	if err != nil {
		t.Fatal(err)
	}
	// A second handler, not held, tells when the delete is journaled.
	seen := &uidRecorder{recorder: newRecorder()}
	if _, err := inf.AddEventHandler(seen); err != nil {
		t.Fatal(err)
	}
	if err := kube.CoreV1().ConfigMaps(ns).Delete(ctx, "zz-last", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	deleted := func(evs []string) bool {
		for _, e := range evs {
			if e == "unknown zz-last "+string(last.UID) || e == "delete zz-last "+string(last.UID) {
				return true
			}
		}
		return false
	}
	seen.waitFor(t, "the delete journaled", deleted)
	g.hold.release()
	if !toolscache.WaitForCacheSync(ctx.Done(), reg.HasSynced) {
		t.Fatal("the handler did not sync")
	}
	evs := g.waitFor(t, "a delete of zz-last", deleted)
	for _, e := range evs {
		if strings.HasPrefix(e, "add zz-last") {
			t.Fatalf("zz-last added after its delete: %q", evs)
		}
	}
}
