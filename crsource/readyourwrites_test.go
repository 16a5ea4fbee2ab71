package crsource_test

import (
	"context"
	"errors"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/go-logr/logr/testr"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/watchjournal/watchjournal/crsource"
	"github.com/watchjournal/watchjournal/internal/testing/controlplane"
	"github.com/watchjournal/watchjournal/journal"
	"github.com/watchjournal/watchjournal/journal/cache"
)

// rywResult is what the reconciler saw after its own Patch and the wait.
type rywResult struct {
	patched, read *corev1.ConfigMap
	err           error
}

// Ensure read-your-writes through WaitFor: a controller patches the object
// it reconciles, waits for the patch's resourceVersion, and then reads the
// patched object through the journal (journal/cache's Reader); a
// resourceVersion that never arrives ends the wait with a typed error
// (journal.ErrNotApplied, context.DeadlineExceeded) at the deadline.
func TestSource_WaitFor_ReadYourWrites(t *testing.T) {
	ctrllog.SetLogger(logr.Discard())
	cp := controlplane.StartT(t, controlplane.Options{})
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	kube := kubernetes.NewForConfigOrDie(cp.RESTConfig())
	ns := "ryw"
	if _, err := kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	cms := kube.CoreV1().ConfigMaps(ns)
	if _, err := cms.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "a"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	res := journal.Resource{GVR: schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}, Namespace: ns}
	src, err := crsource.New(cp.RESTConfig(), crsource.Options{Path: filepath.Join(t.TempDir(), "cm.db"), Resource: res, NoSync: true,
		Loop: crsource.LoopOptions{MinBackoff: 20 * time.Millisecond, MaxBackoff: 200 * time.Millisecond, Logger: testr.New(t)}})
	if err != nil {
		t.Fatal(err)
	}
	reader := cache.NewReader(src.Journal(), scheme.Scheme)
	results := make(chan rywResult, 10)
	// The reconciler patches each object once (data.step), then waits for
	// its own write and reads it back through the journal.
	r := newRecorder(func(name string) (reconcile.Result, error) {
		var cur corev1.ConfigMap
		if err := reader.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, &cur); err != nil {
			return reconcile.Result{}, client.IgnoreNotFound(err)
		}
		if cur.Data["step"] != "" {
			return reconcile.Result{}, nil
		}
		patched, err := cms.Patch(ctx, name, types.MergePatchType, []byte(`{"data":{"step":"patched"}}`), metav1.PatchOptions{})
		if err != nil {
			return reconcile.Result{}, err
		}
		wctx, wcancel := context.WithTimeout(ctx, 30*time.Second)
		defer wcancel()
		out := rywResult{patched: patched}
		if out.err = src.WaitFor(wctx, patched); out.err == nil {
			var read corev1.ConfigMap
			out.err = reader.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, &read)
			out.read = &read
		}
		results <- out
		return reconcile.Result{}, nil
	})
	stop := runManager(t, cp, src, r)
	defer func() { _ = stop() }()

	var got rywResult
	select {
	case got = <-results:
	case <-ctx.Done():
		t.Fatal("the reconciler never patched")
	}
	if got.err != nil {
		t.Fatalf("WaitFor then Get after the controller's own Patch: %v", got.err)
	}
	if got.read.Data["step"] != "patched" || got.read.ResourceVersion != got.patched.ResourceVersion {
		t.Errorf("read after WaitFor: data %v at resourceVersion %s; want step=patched at %s (the patch's)",
			got.read.Data, got.read.ResourceVersion, got.patched.ResourceVersion)
	}

	// A resourceVersion far past anything the server has written: never
	// applied, the wait ends at its deadline with the typed error.
	rv, err := strconv.ParseUint(got.patched.ResourceVersion, 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	future := got.patched.DeepCopy()
	future.ResourceVersion = strconv.FormatUint(rv+1_000_000, 10)
	wctx, wcancel := context.WithTimeout(ctx, time.Second)
	defer wcancel()
	start := time.Now()
	err = src.WaitFor(wctx, future)
	var na *journal.NotAppliedError
	if !errors.As(err, &na) || !errors.Is(err, journal.ErrNotApplied) || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("WaitFor of a resourceVersion never written = %v; want a *journal.NotAppliedError matching ErrNotApplied and DeadlineExceeded", err)
	}
	if na.KeyResourceVersion != got.patched.ResourceVersion {
		t.Errorf("NotAppliedError.KeyResourceVersion = %q; want the patch's %q", na.KeyResourceVersion, got.patched.ResourceVersion)
	}
	if d := time.Since(start); d < time.Second {
		t.Errorf("WaitFor returned after %v, before its 1 s deadline", d)
	}
}
