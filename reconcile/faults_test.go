package reconcile_test

// Fault tests: stalls, apiserver restarts, cut/heal cycles, no-op writes,
// RBAC revoked. Each asserts exact events and the final index.

import (
	"context"
	"errors"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/watchjournal/watchjournal/reconcile"
)

const readerToken = "wj-reader-token"

// A stalled connection (open, passing no bytes, no FIN or RST) is replaced
// within IdleTimeout; the change made meanwhile arrives once.
func TestLoop_StalledConnection_ReplacedWithinBound(t *testing.T) {
	e := newEnv(t)
	e.create("a")
	opts := testOptions(t)
	opts.IdleTimeout = time.Second
	h := e.startListed(nil, opts)

	e.proxy.Stall()
	stalled := time.Now()
	e.update("a")
	e.waitStatus("idle restart", func(s reconcile.Status) bool { return s.IdleRestarts >= 1 })
	if d := time.Since(stalled); d > 5*time.Second {
		t.Errorf("stall detected after %v; want within about IdleTimeout (1s)", d)
	}
	e.proxy.Heal()
	e.waitHead(h + 1)
	// Give a duplicate the chance to show: wait for one more watch to open.
	w := e.loop.Status().Watches
	e.waitStatus("another watch", func(s reconcile.Status) bool { return s.Watches > w })
	e.expectEvents("events after the stall", h+1, []string{"MODIFIED a watch"})
	e.checkIndex(e.j)
}

// Scenario S05 and S06: with nothing changed, cut/heal cycles (with and
// without compaction), an apiserver restart and a no-op patch add no event;
// then one real change adds exactly one.
func TestLoop_NothingChanged_NoEvents(t *testing.T) {
	e := newEnv(t)
	e.createAll("a", "b", "c")
	h := e.startListed(nil, testOptions(t))

	for i, compact := range []bool{false, true, true} {
		w := e.loop.Status().Watches
		e.proxy.Cut()
		if compact {
			e.create("other-" + string(rune('0'+i))) // compaction past our RV needs writes
			e.delete("other-" + string(rune('0'+i)))
			e.compact()
		}
		e.proxy.Heal()
		e.waitStatus("watching again", func(s reconcile.Status) bool { return s.Watches > w && s.Phase == reconcile.PhaseWatching })
	}
	w := e.loop.Status().Watches
	ctx := context.Background()
	if err := e.cp.RestartAPIServer(ctx); err != nil {
		t.Fatal(err)
	}
	e.waitStatus("watching after the apiserver restart", func(s reconcile.Status) bool { return s.Watches > w && s.Phase == reconcile.PhaseWatching })
	// A no-op patch does not bump the resourceVersion.
	if _, err := e.kube.CoreV1().ConfigMaps(e.ns).Patch(ctx, "a", types.MergePatchType, []byte(`{}`), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	if got, _ := e.eventsFrom(h + 1); len(got) != 0 {
		t.Fatalf("events with nothing changed = %q; want none", got)
	}
	if st := e.loop.Status(); st.Lists < 2 {
		t.Errorf("Status.Lists = %d; the compactions should have forced relists", st.Lists)
	}
	e.update("b")
	e.waitHead(h + 1)
	e.expectEvents("after one update", h+1, []string{"MODIFIED b watch"})
	e.checkIndex(e.j)
}

// Scenario S10: RBAC revoked mid-run. The loop reports a typed Forbidden
// error, backs off, keeps index and journal, and after RBAC is restored
// journals the delete that happened meanwhile, once.
func TestLoop_Forbidden_KeepsStateAndRecovers(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	rbac := e.kube.RbacV1()
	role := &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: "reader"}, Rules: []rbacv1.PolicyRule{{
		APIGroups: []string{""}, Resources: []string{"configmaps"}, Verbs: []string{"get", "list", "watch"}}}}
	if _, err := rbac.Roles(e.ns).Create(ctx, role, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	binding := &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "reader"},
		RoleRef:  rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "Role", Name: "reader"},
		Subjects: []rbacv1.Subject{{Kind: "User", APIGroup: "rbac.authorization.k8s.io", Name: "wj-reader"}}}
	if _, err := rbac.RoleBindings(e.ns).Create(ctx, binding, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	e.create("a")
	e.create("b")
	cfg := e.cp.TokenConfig(readerToken)
	cfg.Host = "https://" + e.proxy.Addr()
	h := e.startListed(cfg, testOptions(t))

	if err := rbac.RoleBindings(e.ns).Delete(ctx, "reader", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	e.proxy.Cut()
	e.proxy.Heal()
	st := e.waitStatus("a Forbidden error", func(s reconcile.Status) bool { return apierrors.IsForbidden(s.LastError) })
	if !errors.Is(st.LastError, reconcile.ErrWatchStart) && !errors.Is(st.LastError, reconcile.ErrList) {
		t.Errorf("LastError = %v; want it to name the phase (ErrWatchStart or ErrList)", st.LastError)
	}
	e.delete("a")
	e.create("other") // writes, so compaction passes our resourceVersion
	e.compact()
	// Still forbidden: nothing changes, and the loop keeps trying.
	n := e.loop.Status().Watches
	e.waitStatus("more failed attempts", func(s reconcile.Status) bool {
		return apierrors.IsForbidden(s.LastError) && s.Phase == reconcile.PhaseBackoff
	})
	if got, _ := e.eventsFrom(h + 1); len(got) != 0 || e.loop.Status().Watches != n {
		t.Fatalf("while forbidden: events %q, watches %d -> %d; want no change", got, n, e.loop.Status().Watches)
	}
	if _, ok, _ := e.j.Lookup(e.ns + "/a"); !ok {
		t.Fatalf("index lost a while forbidden")
	}

	if _, err := rbac.RoleBindings(e.ns).Create(ctx, binding, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	e.waitStatus("relist after RBAC is restored", func(s reconcile.Status) bool { return s.Lists >= 2 && s.Phase == reconcile.PhaseWatching })
	e.expectEvents("events after RBAC is restored", h+1, []string{"DELETED a relist", "ADDED other relist"})
	e.checkIndex(e.j)
}

// kube-apiserver restarts while we are cut off and things change, with and
// without a compaction: exactly the gap, once each, no duplicates.
func TestLoop_APIServerRestart_ExactGap(t *testing.T) {
	for _, compact := range []bool{false, true} {
		t.Run(map[bool]string{false: "resume", true: "compacted"}[compact], func(t *testing.T) {
			e := newEnv(t)
			e.createAll("a", "b", "c")
			h := e.startListed(nil, testOptions(t))
			e.proxy.Cut()
			e.update("a")
			e.delete("b")
			e.create("d")
			if err := e.cp.RestartAPIServer(context.Background()); err != nil {
				t.Fatal(err)
			}
			want := []string{"MODIFIED a watch", "DELETED b watch", "ADDED d watch"}
			if compact {
				e.compact()
				want = []string{"MODIFIED a relist", "DELETED b relist", "ADDED d relist"}
			}
			e.proxy.Heal()
			e.waitHead(h + 3)
			w := e.loop.Status().Watches
			e.update("c")
			e.waitHead(h + 4)
			e.expectEvents("events", h+1, append(want, "MODIFIED c watch"))
			if st := e.loop.Status(); st.Watches < w {
				t.Errorf("watches went back: %d < %d", st.Watches, w)
			}
			e.checkIndex(e.j)
		})
	}
}

// Scenario S11 without a controller manager: the test itself deletes the
// namespace's objects (as the namespace controller would; none runs here)
// and finalizes the namespace away, then recreates it. Every object gets its
// DELETED, an absent namespace is no error loop, and the new objects are
// ADDED with new UIDs.
func TestLoop_NamespaceEmptiedByTestFinalizedAndRecreated(t *testing.T) {
	e := newEnv(t)
	e.create("a")
	e.create("b")
	h := e.startListed(nil, testOptions(t))
	ctx := context.Background()
	oldA, _, _ := e.j.Lookup(e.ns + "/a")

	e.delete("a")
	e.delete("b")
	ns, err := e.kube.CoreV1().Namespaces().Get(ctx, e.ns, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if err := e.kube.CoreV1().Namespaces().Delete(ctx, e.ns, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	ns, _ = e.kube.CoreV1().Namespaces().Get(ctx, e.ns, metav1.GetOptions{})
	ns.Spec.Finalizers = nil
	if _, err := e.kube.CoreV1().Namespaces().Finalize(ctx, ns, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	e.waitHead(h + 2)
	// Absent namespace: a relist finds nothing to change and no error.
	e.loop.Verify()
	e.waitStatus("verify with the namespace gone", func(s reconcile.Status) bool { return s.Verifies == 1 && s.Phase == reconcile.PhaseWatching })
	if st := e.loop.Status(); st.LastError != nil || st.Divergences != 0 {
		t.Fatalf("with the namespace gone: %+v; want no error, no divergence", st)
	}
	if _, err := e.kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: e.ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	na := e.create("a")
	e.waitHead(h + 3)
	got, evs := e.eventsFrom(h + 1)
	equal(t, "events", got, []string{"DELETED a watch", "DELETED b watch", "ADDED a watch"})
	if len(evs) == 3 && (evs[2].UID != string(na.UID) || evs[2].UID == oldA.UID) {
		t.Errorf("ADDED a uid %s; want the new %s (old %s)", evs[2].UID, na.UID, oldA.UID)
	}
	e.checkIndex(e.j)
}
