package crsource_test

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/go-logr/logr/testr"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/watchjournal/watchjournal/crsource"
	"github.com/watchjournal/watchjournal/internal/testing/controlplane"
	"github.com/watchjournal/watchjournal/journal"
)

// Ensure a changed label selector migrates the file instead of refusing
// the start: the restart relists under the new selector, the key that
// left it is journaled DELETED with reason left-selector (it still
// exists) and reconciled, and the keys still selected, unchanged, are
// not reconciled again.
func TestSource_SelectorChangeMigrates(t *testing.T) {
	ctrllog.SetLogger(logr.Discard())
	cp := controlplane.StartT(t, controlplane.Options{})
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	kube := kubernetes.NewForConfigOrDie(cp.RESTConfig())
	ns := "selchange"
	if _, err := kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	for name, app := range map[string]string{"a": "x", "b": "x", "c": "y"} {
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"app": app}}}
		if _, err := kube.CoreV1().ConfigMaps(ns).Create(ctx, cm, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	path := filepath.Join(t.TempDir(), "cm.db")
	open := func(selector string) *crsource.Source {
		res := journal.Resource{GVR: schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}, Namespace: ns, LabelSelector: selector}
		src, err := crsource.New(cp.RESTConfig(), crsource.Options{Path: path, Resource: res, NoSync: true,
			Loop: crsource.LoopOptions{MinBackoff: 20 * time.Millisecond, MaxBackoff: 200 * time.Millisecond, Logger: testr.New(t)}})
		if err != nil {
			t.Fatalf("New with -l %s: %v", selector, err)
		}
		return src
	}
	settled := func(src *crsource.Source, r *recorder, n int) func() error {
		return func() error {
			c, _ := src.Committed()
			h, _ := src.Journal().Head()
			if len(r.names()) < n || c != h {
				return fmt.Errorf("seen %v, committed %d, head %d", r.names(), c, h)
			}
			return nil
		}
	}

	src := open("app in (x,y)")
	r1 := newRecorder(nil)
	stop := runManager(t, cp, src, r1)
	until(t, time.Minute, "a, b, c reconciled and committed", settled(src, r1, 3))
	h0, _ := src.Journal().Head()
	if err := stop(); err != nil {
		t.Fatal(err)
	}

	src = open("app=x")
	r2 := newRecorder(nil)
	stop = runManager(t, cp, src, r2)
	defer func() { _ = stop() }()
	until(t, time.Minute, "c reconciled and committed", settled(src, r2, 1))
	if got := r2.names(); len(got) != 1 || got[0] != "c" {
		t.Errorf("reconciled after the selector change: %v; want only c (left the selector)", got)
	}
	evs, err := src.Journal().Read(h0+1, 100)
	if err != nil {
		t.Fatal(err)
	}
	if len(evs) != 1 || evs[0].Key != ns+"/c" || evs[0].Type != journal.Deleted || evs[0].Reason != journal.ReasonLeftSelector {
		t.Errorf("events after the selector change: %+v; want one DELETED of %s/c, reason left-selector", evs, ns)
	}
	if res, _, _ := src.Journal().Resource(); res.LabelSelector != "app=x" {
		t.Errorf("recorded selector %q; want app=x", res.LabelSelector)
	}
}
