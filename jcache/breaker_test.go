package jcache_test

// Attempts to break Exact's restart-exactness claims ("breaker"),
// against the real apiserver: a key whose reconcile failed when the
// process died; two controllers on one cache and GVK; a change to a key
// waiting on a long RequeueAfter; read-your-writes after a delete.

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	crcache "sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/go-logr/logr/testr"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	"github.com/watchjournal/watchjournal/internal/testing/controlplane"
	"github.com/watchjournal/watchjournal/jcache"
	"github.com/watchjournal/watchjournal/journal"
)

// startManager runs a manager on the journal cache in dir with what build
// adds, as a new process would; stop cancels it and waits.
func startManager(t *testing.T, cp *controlplane.ControlPlane, dir string, build func(manager.Manager) error) (stop func()) {
	t.Helper()
	mgr := newManager(t, cp.RESTConfig(), ctrl.Options{
		NewCache: jcache.NewFunc(jcache.Options{Dir: dir, NoSync: true, Logger: testr.New(t)}),
	})
	if err := build(mgr); err != nil {
		t.Fatal(err)
	}
	return runManager(t, mgr).stop
}

// exactCM adds the controller name, reconciling ConfigMaps with r through
// an Exact source, and returns the source through src. Its sources stop
// as by SIGKILL: no last commit.
func exactCM(name string, r *mirror, src **jcache.ExactSource) func(manager.Manager) error {
	return func(mgr manager.Manager) error {
		r.c = mgr.GetClient()
		ex := jcache.ExactWith(mgr.GetCache(), name, jcache.NoFinalCommit(jcache.ExactOptions{}))
		*src = ex.Kind(&corev1.ConfigMap{}, &handler.EnqueueRequestForObject{})
		return ctrl.NewControllerManagedBy(mgr).Named(name).WatchesRawSource(*src).Complete(ex.Reconciler(r))
	}
}

// both adds what each of builds adds, stopping at the first error.
func both(builds ...func(manager.Manager) error) func(manager.Manager) error {
	return func(mgr manager.Manager) error {
		for _, b := range builds {
			if err := b(mgr); err != nil {
				return err
			}
		}
		return nil
	}
}

// patchCM sets the data key v of the ConfigMap ns/name to v by a merge
// patch.
func patchCM(t *testing.T, ctx context.Context, kube kubernetes.Interface, ns, name, v string) {
	t.Helper()
	if _, err := kube.CoreV1().ConfigMaps(ns).Patch(ctx, name, types.MergePatchType,
		[]byte(fmt.Sprintf(`{"data":{"v":%q}}`, v)), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
}

// TestBreak_FailedKeyThenKilled_ReconciledAgain: a key whose reconcile
// keeps failing holds the commit; the process dies (no last commit) after
// later keys reconciled; the restart reconciles the failed key again.
func TestBreak_FailedKeyThenKilled_ReconciledAgain(t *testing.T) {
	cp, kube, ns := setup(t)
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	for _, name := range []string{"a", "bad", "c"} {
		createCM(t, kube, ns, name, nil, nil)
	}
	dir := t.TempDir()
	ok := func(string) (reconcile.Result, error) { return reconcile.Result{}, nil }
	r1 := newMirror(ns, func(name string) (reconcile.Result, error) {
		if name == "bad" {
			return reconcile.Result{}, fmt.Errorf("bad fails")
		}
		return reconcile.Result{}, nil
	})
	var src *jcache.ExactSource
	stop := startManager(t, cp, dir, exactCM("mirror", r1, &src))
	r1.waitUntil(t, "a, c reconciled, bad tried twice", func() bool {
		return r1.count("a") > 0 && r1.count("c") > 0 && r1.count("bad") >= 2
	}, func() any { return r1.names() })
	// Later changes of other keys, reconciled, after bad's failure.
	patchCM(t, ctx, kube, ns, "a", "1")
	createCM(t, kube, ns, "d", nil, nil)
	r1.waitUntil(t, "a changed and d reconciled", func() bool {
		return r1.count("a") > 1 && r1.count("d") > 0
	}, func() any { return r1.names() })
	if at, s := atHead(src); at {
		t.Fatalf("committed at the head while bad keeps failing: %s", s)
	}
	stop() // as SIGKILL: no last commit

	r2 := newMirror(ns, ok)
	stop = startManager(t, cp, dir, exactCM("mirror", r2, &src))
	defer stop()
	r2.waitAtHead(t, "bad reconciled after the restart, the commit at the head", func() bool { return r2.count("bad") > 0 }, src)
}

// TestBreak_TwoControllersOneGVK: two Exact controllers over one cache
// and one GVK (one journal file) have independent consumers: one
// controller's failing key holds only its own commit; after a stop
// without a last commit, each restarts from its own position.
func TestBreak_TwoControllersOneGVK(t *testing.T) {
	cp, kube, ns := setup(t)
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	for _, name := range []string{"a", "bad", "c"} {
		createCM(t, kube, ns, name, nil, nil)
	}
	dir := t.TempDir()
	ok := func(string) (reconcile.Result, error) { return reconcile.Result{}, nil }
	failBad := func(name string) (reconcile.Result, error) {
		if name == "bad" {
			return reconcile.Result{}, fmt.Errorf("bad fails")
		}
		return reconcile.Result{}, nil
	}
	one, two := newMirror(ns, failBad), newMirror(ns, ok)
	var s1, s2 *jcache.ExactSource
	stop := startManager(t, cp, dir, both(exactCM("one", one, &s1), exactCM("two", two, &s2)))
	two.waitAtHead(t, "two: all reconciled, committed at the head", func() bool { return len(two.names()) == 3 }, s2)
	one.waitUntil(t, "one: bad tried twice", func() bool { return one.count("bad") >= 2 }, func() any { return one.names() })
	if s1.Journal() != s2.Journal() {
		t.Fatalf("two journals for one GVK on one cache: %s, %s", s1.Journal().Path(), s2.Journal().Path())
	}
	if s1.Consumer() == s2.Consumer() {
		t.Fatalf("one consumer name %q for two controllers", s1.Consumer())
	}
	if at, s := atHead(s1); at {
		t.Fatalf("one committed at the head while bad fails: %s", s)
	}
	// A later change: two commits past it, one stays behind bad.
	patchCM(t, ctx, kube, ns, "c", "1")
	two.waitAtHead(t, "two: c's change reconciled and committed", func() bool { return two.count("c") > 1 }, s2)
	one.waitUntil(t, "one: c's change reconciled", func() bool { return one.count("c") > 1 }, func() any { return one.names() })
	if at, s := atHead(s1); at {
		t.Fatalf("one committed at the head while bad fails: %s", s)
	}
	stop()

	one2, two2 := newMirror(ns, ok), newMirror(ns, ok)
	stop = startManager(t, cp, dir, both(exactCM("one", one2, &s1), exactCM("two", two2, &s2)))
	defer stop()
	// A change after the start: once both reconciled and committed it,
	// whatever the restart queued has been reconciled.
	patchCM(t, ctx, kube, ns, "a", "2")
	one2.waitAtHead(t, "one: bad and a reconciled, committed at the head", func() bool { return one2.count("bad") > 0 && one2.count("a") > 0 }, s1)
	two2.waitAtHead(t, "two: a reconciled, committed at the head", func() bool { return two2.count("a") > 0 }, s2)
	if got := two2.names(); strings.Join(got, ",") != "a" {
		t.Fatalf("two reconciled %v after the restart; want only a (its own position was at the head; one's failing key is not its business)", got)
	}
}

// TestBreak_ChangeDuringLongRequeueAfterIsPrompt: a key whose reconcile
// returned RequeueAfter 1h changes: the change is reconciled at once, not
// when the timer fires, and committed; a restart then does not reconcile
// it (its timer is an hour away).
func TestBreak_ChangeDuringLongRequeueAfterIsPrompt(t *testing.T) {
	cp, kube, ns := setup(t)
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	createCM(t, kube, ns, "slow", nil, nil)
	dir := t.TempDir()
	outcome := func(string) (reconcile.Result, error) { return reconcile.Result{RequeueAfter: time.Hour}, nil }
	r1 := newMirror(ns, outcome)
	var src *jcache.ExactSource
	stop := startManager(t, cp, dir, exactCM("mirror", r1, &src))
	r1.waitAtHead(t, "slow reconciled, committed", func() bool { return r1.count("slow") == 1 }, src)
	start := time.Now()
	patchCM(t, ctx, kube, ns, "slow", "1")
	r1.waitAtHead(t, "slow's change reconciled, committed", func() bool { return r1.count("slow") == 2 }, src)
	if d := time.Since(start); d > 10*time.Second {
		t.Fatalf("the change of a key waiting on RequeueAfter 1h took %v to reconcile; want at once", d)
	}
	stop()

	r2 := newMirror(ns, outcome)
	stop = startManager(t, cp, dir, exactCM("mirror", r2, &src))
	defer stop()
	createCM(t, kube, ns, "z", nil, nil)
	r2.waitAtHead(t, "z reconciled, committed", func() bool { return r2.count("z") > 0 }, src)
	if got := r2.names(); strings.Join(got, ",") != "z" {
		t.Fatalf("after a restart reconciled %v; want z only (slow's change was reconciled, its timer is an hour away)", got)
	}
}

// TestBreak_ReadYourDelete: after the controller's own Delete, a wait on
// the journal ends only once the delete is applied, so that a Get
// through the cache says NotFound. WaitFor given the object read before
// the Delete (the advice of WaitFor's doc) returns at once: the
// key's index entry is at that object's resourceVersion. WaitForDeleted
// waits for the key to be gone (or taken by another UID).
func TestBreak_ReadYourDelete(t *testing.T) {
	cp, kube, ns := setup(t)
	r := startCache(t, jcache.NewFunc(jcache.Options{Dir: t.TempDir(), NoSync: true}), crcache.Options{}, cp)
	defer r.stop()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	for i := range 5 {
		name := fmt.Sprintf("d%d", i)
		created := createCM(t, kube, ns, name, nil, nil)
		wctx, wcancel := context.WithTimeout(ctx, 30*time.Second)
		if err := jcache.WaitFor(wctx, r.c, created); err != nil {
			t.Fatalf("WaitFor after a Create: %v", err)
		}
		if err := kube.CoreV1().ConfigMaps(ns).Delete(ctx, name, metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		if err := jcache.WaitForDeleted(wctx, r.c, created); err != nil {
			t.Fatalf("WaitForDeleted after a Delete: %v", err)
		}
		wcancel()
		var cm corev1.ConfigMap
		if err := r.c.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, &cm); !apierrors.IsNotFound(err) {
			t.Fatalf("Get through the cache after the Delete and WaitForDeleted = %v (resourceVersion %q); want NotFound", err, cm.ResourceVersion)
		}
	}
	// A name taken again by a new object (another UID) counts as deleted.
	old := createCM(t, kube, ns, "again", nil, nil)
	deleteCM(t, ctx, kube, ns, "again")
	createCM(t, kube, ns, "again", nil, nil)
	wctx, wcancel := context.WithTimeout(ctx, 30*time.Second)
	defer wcancel()
	if err := jcache.WaitForDeleted(wctx, r.c, old); err != nil {
		t.Fatalf("WaitForDeleted of a name recreated: %v", err)
	}
	// An object not deleted: the wait times out with ErrNotApplied.
	kept := createCM(t, kube, ns, "kept", nil, nil)
	if err := jcache.WaitFor(wctx, r.c, kept); err != nil {
		t.Fatal(err)
	}
	fctx, fcancel := context.WithTimeout(ctx, 500*time.Millisecond)
	defer fcancel()
	if err := jcache.WaitForDeleted(fctx, r.c, kept); !errors.Is(err, journal.ErrNotApplied) || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("WaitForDeleted of an object not deleted = %v; want ErrNotApplied and DeadlineExceeded", err)
	}
}

// TestBreak_FailingKeyDoesNotStopTheFeed: one key whose reconcile keeps
// failing holds the commit (it must be reconciled again after a restart),
// but not the other keys: events after it keep flowing past MaxPending,
// as controller-runtime keeps reconciling other keys while one backs off.
// MaxPending bounds requests not yet reconciled; those reconciled behind
// the failing one do not count.
func TestBreak_FailingKeyDoesNotStopTheFeed(t *testing.T) {
	cp, kube, ns := setup(t)
	rc := startCache(t, jcache.NewFunc(jcache.Options{Dir: t.TempDir(), NoSync: true, Logger: testr.New(t)}), crcache.Options{}, cp)
	defer rc.stop()
	h := runByHandWith(t, rc.c, ns, func(name string) (reconcile.Result, error) {
		if name == "bad" {
			return reconcile.Result{}, fmt.Errorf("bad fails")
		}
		return reconcile.Result{}, nil
	}, jcache.ExactOptions{MaxPending: 3})
	defer h.stop()
	createCM(t, kube, ns, "bad", nil, nil)
	h.rec.waitUntil(t, "bad tried twice", func() bool { return h.rec.count("bad") >= 2 }, func() any { return h.rec.names() })
	const n = 12
	for i := range n {
		createCM(t, kube, ns, fmt.Sprintf("c%02d", i), nil, nil)
	}
	h.rec.waitUntil(t, "every key after bad reconciled", func() bool { return len(h.rec.names()) == n+1 },
		func() any { _, s := atHead(h.src); return fmt.Sprint(h.rec.names(), s) })
	if at, s := atHead(h.src); at {
		t.Fatalf("committed at the head while bad keeps failing: %s", s)
	}
}

// TestBreak_OwnedRecreatedWithAnotherOwnerWhileDown: while the process is
// down, an owned Secret is deleted and created again under the same name,
// controlled by another ConfigMap, and etcd is compacted (the restart
// relists: the old Secret is a tombstone of another UID, without its
// object). EnqueueRequestForOwner must reconcile both the old owner (from
// the old Secret) and the new one, and nothing else.
func TestBreak_OwnedRecreatedWithAnotherOwnerWhileDown(t *testing.T) {
	cp, kube, ns := setup(t)
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	var cmB *corev1.ConfigMap
	for _, name := range []string{"a", "b", "c"} {
		cm := createCM(t, kube, ns, name, nil, nil)
		if name == "b" {
			cmB = cm
		}
	}
	dir := t.TempDir()
	var forSrc, ownsSrc *jcache.ExactSource
	build := func(r *mirror) func(manager.Manager) error {
		return func(mgr manager.Manager) error {
			r.c = mgr.GetClient()
			ex := jcache.ExactWith(mgr.GetCache(), "mirror", jcache.NoFinalCommit(jcache.ExactOptions{})) // no last commit: as by SIGKILL
			forSrc = ex.Kind(&corev1.ConfigMap{}, &handler.EnqueueRequestForObject{})
			ownsSrc = ex.Kind(secretMeta(), handler.EnqueueRequestForOwner(mgr.GetScheme(), mgr.GetRESTMapper(), &corev1.ConfigMap{}, handler.OnlyControllerOwner()))
			return ctrl.NewControllerManagedBy(mgr).Named("mirror").WatchesRawSource(forSrc).WatchesRawSource(ownsSrc).Complete(ex.Reconciler(r))
		}
	}
	r1 := newMirror(ns, nil)
	stop := startManager(t, cp, dir, build(r1))
	r1.waitUntil(t, "3 reconciled, 3 Secrets, both sources at their heads", func() bool {
		if len(r1.names()) < 3 {
			return false
		}
		if ok, _ := atHead(forSrc, ownsSrc); !ok {
			return false
		}
		idx, err := ownsSrc.Journal().ScanIndex(ns+"/", 1000)
		n := 0
		for _, e := range idx {
			if strings.HasPrefix(e.Key, ns+"/") {
				n++
			}
		}
		return err == nil && n == 3
	}, func() any { _, s := atHead(forSrc, ownsSrc); return fmt.Sprint(r1.names(), s) })
	stop()

	if err := kube.CoreV1().Secrets(ns).Delete(ctx, "a-child", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := kube.CoreV1().Secrets(ns).Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "a-child", Namespace: ns,
		OwnerReferences: []metav1.OwnerReference{{APIVersion: "v1", Kind: "ConfigMap", Name: "b", UID: cmB.UID, Controller: ptr.To(true)}}}},
		metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := cp.Compact(ctx); err != nil {
		t.Fatal(err)
	}

	r2 := newMirror(ns, nil)
	stop = startManager(t, cp, dir, build(r2))
	defer stop()
	r2.waitAtHead(t, "a and b reconciled, both sources at their heads", func() bool { return r2.count("a") > 0 && r2.count("b") > 0 }, forSrc, ownsSrc)
	if got := r2.names(); strings.Join(got, ",") != "a,b" {
		t.Fatalf("after the restart reconciled %v; want a (its Secret gone) and b (now owns a-child), not c", got)
	}
}
