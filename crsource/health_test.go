package crsource_test

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/go-logr/logr/testr"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	ctrlconfig "sigs.k8s.io/controller-runtime/pkg/config"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/watchjournal/watchjournal/crsource"
	"github.com/watchjournal/watchjournal/internal/testing/controlplane"
	"github.com/watchjournal/watchjournal/journal"
	wjreconcile "github.com/watchjournal/watchjournal/reconcile"
)

// runManager runs a real manager with one controller over src, its
// healthz and readyz checks registered, until the returned stop is called.
func runManager(t *testing.T, cp *controlplane.ControlPlane, src *crsource.Source, r *recorder) (stop func() error) {
	t.Helper()
	mgr, err := manager.New(cp.RESTConfig(), manager.Options{
		Metrics:                metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0",
		Controller:             ctrlconfig.Controller{SkipNameValidation: ptr.To(true)},
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := mgr.AddHealthzCheck("watchjournal", src.HealthzCheck()); err != nil {
		t.Fatal(err)
	}
	if err := mgr.AddReadyzCheck("watchjournal", src.ReadyzCheck()); err != nil {
		t.Fatal(err)
	}
	if err := builder.ControllerManagedBy(mgr).Named("health").WatchesRawSource(src).Complete(src.Reconciler(r)); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- mgr.Start(ctx) }()
	return func() error {
		cancel()
		err := <-done
		<-src.Done()
		return err
	}
}

// until waits for cond, checked every 50 ms, for at most d.
func until(t *testing.T, d time.Duration, what string, cond func() error) {
	t.Helper()
	deadline := time.Now().Add(d)
	for {
		err := cond()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s: %v", what, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// Ensure the source's readyz and healthz checks through a real loop: not
// started is not ready but alive; synced is ready; the apiserver down for
// longer than FailingBound is not ready (failing) and still alive (backoff),
// ready again once it is back; a stopped source is not ready.
func TestSource_ReadyzHealthz(t *testing.T) {
	ctrllog.SetLogger(logr.Discard())
	cp := controlplane.StartT(t, controlplane.Options{})
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	kube := kubernetes.NewForConfigOrDie(cp.RESTConfig())
	ns := "health"
	if _, err := kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := kube.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "a"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	res := journal.Resource{GVR: schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}, Namespace: ns}
	src, err := crsource.New(cp.RESTConfig(), crsource.Options{Path: filepath.Join(t.TempDir(), "cm.db"), Resource: res, NoSync: true,
		FailingBound: time.Second,
		Loop:         crsource.LoopOptions{MinBackoff: 20 * time.Millisecond, MaxBackoff: 200 * time.Millisecond, Logger: testr.New(t)}})
	if err != nil {
		t.Fatal(err)
	}
	readyz, healthz := src.ReadyzCheck(), src.HealthzCheck()
	if err := readyz(nil); !errors.Is(err, crsource.ErrNotStarted) {
		t.Errorf("readyz before Start = %v; want ErrNotStarted", err)
	}
	if err := healthz(nil); err != nil {
		t.Errorf("healthz before Start = %v; want nil", err)
	}
	r := newRecorder(nil)
	stop := runManager(t, cp, src, r)
	defer func() {
		if stop != nil {
			_ = stop()
		}
	}()
	if err := src.Loop().WaitForSync(ctx); err != nil {
		t.Fatal(err)
	}
	if err := readyz(nil); err != nil {
		t.Errorf("readyz once synced = %v; want nil", err)
	}

	// The apiserver down: the loop backs off; past FailingBound not ready,
	// and alive all along.
	if err := cp.StopAPIServer(); err != nil {
		t.Fatal(err)
	}
	until(t, time.Minute, "readyz failing", func() error {
		err := readyz(nil)
		if errors.Is(err, wjreconcile.ErrNotReady) && strings.Contains(err.Error(), "failing since") {
			return nil
		}
		return fmt.Errorf("readyz = %v", err)
	})
	if err := healthz(nil); err != nil {
		t.Errorf("healthz with the apiserver down (backoff) = %v; want nil", err)
	}
	if err := cp.StartAPIServer(ctx); err != nil {
		t.Fatal(err)
	}
	until(t, time.Minute, "readyz ready again", func() error { return readyz(nil) })

	// Stopped.
	err, stop = stop(), nil
	if err != nil {
		t.Fatalf("manager Start = %v", err)
	}
	if err := readyz(nil); !errors.Is(err, wjreconcile.ErrNotReady) {
		t.Errorf("readyz after stop = %v; want ErrNotReady", err)
	}
	if err := healthz(nil); err != nil {
		t.Errorf("healthz after a clean stop = %v; want nil", err)
	}
}

// Ensure a loop that stops on a fatal error (the apiserver rejects the
// request: a field selector configmaps do not support, 400) fails both
// healthz and readyz with that error.
func TestSource_HealthzFailsOnFatalError(t *testing.T) {
	ctrllog.SetLogger(logr.Discard())
	cp := controlplane.StartT(t, controlplane.Options{})
	res := journal.Resource{GVR: schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}, Namespace: "default",
		FieldSelector: "spec.nodeName=x"}
	src, err := crsource.New(cp.RESTConfig(), crsource.Options{Path: filepath.Join(t.TempDir(), "cm.db"), Resource: res, NoSync: true,
		Loop: crsource.LoopOptions{MinBackoff: 20 * time.Millisecond, MaxBackoff: 200 * time.Millisecond, Logger: testr.New(t)}})
	if err != nil {
		t.Fatal(err)
	}
	stop := runManager(t, cp, src, newRecorder(nil))
	<-src.Done()
	_ = stop() // the manager ends with the source's error
	if err := src.HealthzCheck()(nil); !errors.Is(err, wjreconcile.ErrRejected) {
		t.Errorf("healthz after the apiserver rejected the watch = %v; want ErrRejected", err)
	}
	if err := src.ReadyzCheck()(nil); !errors.Is(err, wjreconcile.ErrRejected) {
		t.Errorf("readyz after the apiserver rejected the watch = %v; want ErrRejected", err)
	}
}

// Ensure a source made by New runs retention by default (the policy is
// recorded in the file: journalctl stats shows it) and trims under a
// policy it is given, never past the consumer's commit.
func TestSource_Retention(t *testing.T) {
	ctrllog.SetLogger(logr.Discard())
	cp := controlplane.StartT(t, controlplane.Options{})
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	kube := kubernetes.NewForConfigOrDie(cp.RESTConfig())
	ns := "retention"
	if _, err := kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	res := journal.Resource{GVR: schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}, Namespace: ns}
	loopOpts := crsource.LoopOptions{MinBackoff: 20 * time.Millisecond, MaxBackoff: 200 * time.Millisecond, Logger: testr.New(t)}
	path := filepath.Join(t.TempDir(), "cm.db")

	// Defaults: DefaultRetention, recorded.
	src, err := crsource.New(cp.RESTConfig(), crsource.Options{Path: path, Resource: res, NoSync: true, Loop: loopOpts})
	if err != nil {
		t.Fatal(err)
	}
	stop := runManager(t, cp, src, newRecorder(nil))
	until(t, time.Minute, "the default retention recorded", func() error {
		r, err := src.Journal().Settings().Retention()
		if err == nil && r != crsource.DefaultRetention {
			err = fmt.Errorf("retention %+v; want %+v", r, crsource.DefaultRetention)
		}
		return err
	})
	if crsource.DefaultRetention.MaxBytes != 64<<20 {
		t.Errorf("DefaultRetention = %+v; want MaxBytes 64 MiB", crsource.DefaultRetention)
	}
	if err := stop(); err != nil {
		t.Fatal(err)
	}

	// A bound of 5 events: the journal keeps no more than 5 once the
	// controller has committed them all.
	for i := range 20 {
		if _, err := kube.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("c%02d", i)}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	p := journal.Retention{MaxEvents: 5}
	src, err = crsource.New(cp.RESTConfig(), crsource.Options{Path: path, Resource: res, NoSync: true, Loop: loopOpts, Retention: &p})
	if err != nil {
		t.Fatal(err)
	}
	r := newRecorder(nil)
	stop = runManager(t, cp, src, r)
	defer func() { _ = stop() }()
	j := src.Journal()
	until(t, time.Minute, "20 reconciled and committed, the journal trimmed to 5", func() error {
		st, err := j.Stats()
		if err != nil {
			return err
		}
		c, _ := src.Committed()
		if len(r.names()) < 20 || c != st.LastOffset || st.LastOffset < 20 || st.LastOffset-st.FirstOffset+1 > 5 {
			return fmt.Errorf("seen %d, committed %d, offsets %d..%d", len(r.names()), c, st.FirstOffset, st.LastOffset)
		}
		return nil
	})
	if got, err := j.Settings().Retention(); err != nil || got != p {
		t.Errorf("recorded retention = %+v, %v; want %+v", got, err, p)
	}
}
