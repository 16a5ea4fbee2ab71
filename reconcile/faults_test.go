package reconcile_test

// Fault tests: stalls, apiserver restarts, cut/heal cycles, no-op writes,
// RBAC revoked. Each asserts exact events and the final index.

import (
	"context"
	"errors"
	"testing"
	"time"

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
	e.start(nil, opts)
	e.waitStatus("initial list", watching(1))
	h := e.head()

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
	got, _ := e.eventsFrom(h + 1)
	equal(t, "events after the stall", got, []string{"MODIFIED a watch"})
	e.checkIndex(e.j)
}

// Scenario S05 and S06: with nothing changed, cut/heal cycles (with and
// without compaction), an apiserver restart and a no-op patch add no event;
// then one real change adds exactly one.
func TestLoop_NothingChanged_NoEvents(t *testing.T) {
	e := newEnv(t)
	for _, n := range []string{"a", "b", "c"} {
		e.create(n)
	}
	e.start(nil, testOptions(t))
	e.waitStatus("initial list", watching(1))
	h := e.head()

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
	got, _ := e.eventsFrom(h + 1)
	equal(t, "after one update", got, []string{"MODIFIED b watch"})
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
	e.start(cfg, testOptions(t))
	e.waitStatus("initial list", watching(1))
	h := e.head()

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
	got, _ := e.eventsFrom(h + 1)
	equal(t, "events after RBAC is restored", got, []string{"DELETED a relist", "ADDED other relist"})
	e.checkIndex(e.j)
}
