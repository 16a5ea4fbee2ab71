package adapt_test

// Scaffolding shared by the tests that run against a real apiserver: a
// control plane with one namespace, the ConfigMaps the test starts from, a
// writer process (journal and loop), and the loop conditions it waits on.

import (
	"context"
	"testing"
	"time"

	"github.com/go-logr/logr/testr"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/rest"

	"github.com/watchjournal/watchjournal/internal/testing/controlplane"
	"github.com/watchjournal/watchjournal/journal"
	"github.com/watchjournal/watchjournal/reconcile"
)

// startNamespace starts a control plane with namespace ns and returns it, a
// context that ends after timeout or with the test, and a clientset.
func startNamespace(t *testing.T, ns string, timeout time.Duration) (*controlplane.ControlPlane, context.Context, kubernetes.Interface) {
	t.Helper()
	cp := controlplane.StartT(t, controlplane.Options{})
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	t.Cleanup(cancel)
	return cp, ctx, cp.CreateNamespaceT(t, ns)
}

// createConfigMaps creates an empty ConfigMap for each name.
func createConfigMaps(t *testing.T, ctx context.Context, cms typedcorev1.ConfigMapInterface, names ...string) {
	t.Helper()
	for _, n := range names {
		if _, err := cms.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: n}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
}

// deleteBCompacted deletes ConfigMap b, creates c and compacts etcd, so that
// a watch from before the delete meets a 410 Gone. c is the second write: a
// watch from resourceVersion r reads etcd from r+1, so compaction must pass
// r+1 for it to be gone.
func deleteBCompacted(t *testing.T, ctx context.Context, cp *controlplane.ControlPlane, cms typedcorev1.ConfigMapInterface) {
	t.Helper()
	if err := cms.Delete(ctx, "b", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	createConfigMaps(t, ctx, cms, "c")
	if _, err := cp.Compact(ctx); err != nil {
		t.Fatal(err)
	}
}

// runLoop opens the journal at path with a new Journal and Loop on the
// apiserver at cfg, as a fresh process would, and runs the loop until cond
// holds. stop ends the loop and closes the journal.
func runLoop(t *testing.T, cfg *rest.Config, path string, res journal.Resource, cond func(reconcile.Status) bool) (j *journal.Journal, stop func()) {
	t.Helper()
	j, err := journal.Open(path, &journal.Options{Resource: &res, NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	loop, err := reconcile.New(cfg, j, reconcile.Options{MinBackoff: 20 * time.Millisecond, MaxBackoff: 300 * time.Millisecond, Logger: testr.New(t)})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- loop.Run(ctx) }()
	wctx, wcancel := context.WithTimeout(ctx, 60*time.Second)
	defer wcancel()
	if err := loop.WaitFor(wctx, cond); err != nil {
		t.Fatalf("loop: %v; last status %+v", err, loop.Status())
	}
	return j, func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run = %v", err)
		}
		_ = j.Close()
	}
}

// configMaps is the journal.Resource of the ConfigMaps in namespace ns.
func configMaps(ns string) journal.Resource {
	return journal.Resource{GVR: schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}, Namespace: ns}
}

// synced holds once the writer has listed exactly once and is watching.
func synced(s reconcile.Status) bool { return s.Lists == 1 && s.Phase == reconcile.PhaseWatching }

// resumed holds once a restarted writer is watching without a list: the
// watch resumed from the stored resourceVersion.
func resumed(s reconcile.Status) bool { return s.Synced && s.Phase == reconcile.PhaseWatching }
