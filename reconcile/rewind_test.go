package reconcile_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/watchjournal/watchjournal/internal/controlplane"
)

// Issue 9 item 6: etcd restored from an older backup while the journal
// was down. The resume check finds the server's resourceVersion below the
// stored one, relists (origin restart) and journals the objects the
// restore rolled back, brought back and removed; the index equals the
// server. Before the check, the resume watched a future that never came.
func TestLoop_RewoundHistory_RelistsOnRestart(t *testing.T) {
	controlPlane(t) // fails or skips as the package's when binaries are missing
	// A control plane of its own: the restore rewinds every namespace.
	mine := controlplane.StartT(t, controlplane.Options{})
	saved := cp
	cp = mine
	e := newEnv(t)
	cp = saved
	ctx := context.Background()

	for _, n := range []string{"a", "b", "c"} {
		e.create(n)
	}
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
	got, _ := e.eventsFrom(h + 1)
	equal(t, "events after the backup", got, []string{"ADDED x watch", "MODIFIED a watch", "DELETED b watch"})
	// Writes elsewhere, so that what the apiserver writes when it starts on
	// the restored data does not carry the revision past the stored one.
	pad := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "pad-" + e.ns}, Data: map[string]string{"v": ""}}
	if pad, err = e.kube.CoreV1().ConfigMaps("default").Create(ctx, pad, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 100; i++ {
		pad.Data["v"] = fmt.Sprint(i)
		if pad, err = e.kube.CoreV1().ConfigMaps("default").Update(ctx, pad, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
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
	got, _ = e.eventsFrom(h + 1)
	equal(t, "events after the restore", got, []string{"MODIFIED a restart", "ADDED b restart", "DELETED x restart"})
	e.checkIndex(e.j)

	// And the journal follows the restored history live.
	e.update("c")
	e.waitHead(h + 4)
	got, _ = e.eventsFrom(h + 4)
	equal(t, "live event after the restore", got, []string{"MODIFIED c watch"})
	if st := e.loop.Status(); st.Rewinds != 1 {
		t.Errorf("Status.Rewinds = %d after the restore settled; want 1", st.Rewinds)
	}
}
