package reconcile_test

import (
	"context"
	"fmt"
	"strconv"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/watchjournal/watchjournal/internal/testing/controlplane"
	"github.com/watchjournal/watchjournal/reconcile"
)

// ownPlaneEnv is newEnv on a control plane of the test's own, since a
// restore rewinds every namespace; it skips or fails as the package's
// control plane does when the binaries are missing.
func ownPlaneEnv(t *testing.T) *env {
	t.Helper()
	controlPlane(t)
	mine := controlplane.StartT(t, controlplane.Options{})
	saved := cp
	cp = mine
	defer func() { cp = saved }()
	return newEnv(t)
}

// Etcd restored from an older backup while the journal was down. The resume
// check finds the server's resourceVersion below the stored one, relists
// (origin restart) and journals the objects the restore rolled back, brought
// back and removed; the index equals the server. Without the check, the resume
// would watch a future that never comes.
func TestLoop_RewoundHistory_RelistsOnRestart(t *testing.T) {
	e := ownPlaneEnv(t)
	ctx := context.Background()

	e.createAll("a", "b", "c")
	cfg := e.cp.RESTConfig()
	e.start(cfg, testOptions(t))
	waitSync(t, e.loop)
	h := e.head()

	backup, err := e.cp.BackupEtcd(ctx)
	if err != nil {
		t.Fatal(err)
	}
	e.create("x")
	e.update("a")
	e.delete("b")
	e.waitHead(h + 3)
	e.expectEvents("events after the backup", h+1, []string{"ADDED x watch", "MODIFIED a watch", "DELETED b watch"})
	padRevisions(t, e)
	stored, _ := e.j.ResourceVersion()
	h = e.head()
	e.stop()

	if err := e.cp.RestoreEtcd(ctx, backup); err != nil {
		t.Fatal(err)
	}
	list, err := e.kube.CoreV1().ConfigMaps(e.ns).List(ctx, metav1.ListOptions{Limit: 1})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("stored resourceVersion %s, server's after the restore %s", stored, list.ResourceVersion)

	e.start(cfg, testOptions(t))
	ctx2, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	if err := e.loop.WaitForSync(ctx2); err != nil {
		t.Fatalf("not synced after the restore: %v; status %+v", err, e.loop.Status())
	}
	st := e.loop.Status()
	if st.Rewinds != 1 || st.Lists != 1 {
		t.Errorf("status after the restore: rewinds %d, lists %d; want 1, 1 (%+v)", st.Rewinds, st.Lists, st)
	}
	e.expectEvents("events after the restore", h+1, []string{"MODIFIED a restart", "ADDED b restart", "DELETED pad restart", "DELETED x restart"})
	e.checkIndex(e.j)

	// And the journal follows the restored history live.
	h = e.head()
	e.update("c")
	e.waitHead(h + 1)
	e.expectEvents("live event after the restore", h+1, []string{"MODIFIED c watch"})
	h = e.head()

	// A restore while the loop runs: the apiserver is down meanwhile, the
	// watch cannot be opened, and the resume after the outage checks.
	backup, err = e.cp.BackupEtcd(ctx)
	if err != nil {
		t.Fatal(err)
	}
	e.waitStatus("watching after the backup", func(s reconcile.Status) bool { return s.Phase == reconcile.PhaseWatching })
	e.delete("c")
	e.waitHead(h + 1)
	padRevisions(t, e)
	h = e.head()
	stored, _ = e.j.ResourceVersion()
	if err := e.cp.RestoreEtcd(ctx, backup); err != nil {
		t.Fatal(err)
	}
	list, err = e.kube.CoreV1().ConfigMaps(e.ns).List(ctx, metav1.ListOptions{Limit: 1})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("restored while running: stored resourceVersion %s, server's after the restore %s", stored, list.ResourceVersion)
	st = e.waitStatus("relist after the restore", func(s reconcile.Status) bool {
		return s.Rewinds == 2 && s.Phase == reconcile.PhaseWatching
	})
	e.expectEvents("events after the restore while running", h+1, []string{"ADDED c relist", "DELETED pad relist"})
	e.checkIndex(e.j)
}

// padRevisions creates ConfigMap "pad" in the journaled namespace and
// updates it 150 times, and waits until the journal has applied it all: the
// stored resourceVersion moves well past what the apiserver writes when it
// starts on restored data, so that the restored server's resourceVersion
// stays below it (otherwise the restore is the kind the check cannot see).
func padRevisions(t *testing.T, e *env) {
	t.Helper()
	h := e.head()
	e.create("pad")
	for i := 0; i < 150; i++ {
		e.update("pad")
	}
	e.waitHead(h + 151)
}

// Etcd restored from an older backup while the journal was down, and
// written since, so that the server's resourceVersion has
// passed the stored one: the resume check cannot see it (the stored
// resourceVersion is served, in another history) and the resumed watch
// syncs. One verify soon after the restart, not the periodic one, finds
// what the restore changed: the index loses the object the restore removed
// and gets the versions it brought back.
func TestLoop_RestoredPastStoredRV_VerifiedAfterRestart(t *testing.T) {
	e := ownPlaneEnv(t)
	ctx := context.Background()

	e.createAll("a", "b", "c")
	cfg := e.cp.RESTConfig()
	opts := testOptions(t)
	opts.VerifyInterval = time.Hour // the periodic verify is far away
	e.start(cfg, opts)
	waitSync(t, e.loop)
	backup, err := e.cp.BackupEtcd(ctx)
	if err != nil {
		t.Fatal(err)
	}
	h := e.head()
	e.create("x")
	e.update("a")
	e.delete("b")
	e.waitHead(h + 3)
	stored, _ := e.j.ResourceVersion()
	h = e.head()
	e.stop()

	if err := e.cp.RestoreEtcd(ctx, backup); err != nil {
		t.Fatal(err)
	}
	// Writes elsewhere carry the restored server past the stored
	// resourceVersion.
	if _, err := e.kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "elsewhere"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	storedN, _ := strconv.ParseInt(stored, 10, 64)
	for i := 0; ; i++ {
		list, err := e.kube.CoreV1().ConfigMaps(e.ns).List(ctx, metav1.ListOptions{Limit: 1})
		if err != nil {
			t.Fatal(err)
		}
		if n, _ := strconv.ParseInt(list.ResourceVersion, 10, 64); n > storedN+1 {
			t.Logf("stored resourceVersion %s, server's after the restore and %d writes %s", stored, i, list.ResourceVersion)
			break
		}
		if _, err := e.kube.CoreV1().ConfigMaps("elsewhere").Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("w%d", i)}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}

	e.start(cfg, opts)
	st := e.waitStatus("the restart's verify", func(s reconcile.Status) bool { return s.Verifies >= 1 && s.Phase == reconcile.PhaseWatching })
	if st.Rewinds != 0 || st.Gone != 0 || st.Divergences != 3 {
		t.Errorf("status after the restart's verify: rewinds %d, gone %d, divergences %d; want 0, 0, 3 (%+v)", st.Rewinds, st.Gone, st.Divergences, st)
	}
	e.expectEvents("events after the restart", h+1, []string{"MODIFIED a relist", "ADDED b relist", "DELETED x relist"})
	e.checkIndex(e.j)
}
