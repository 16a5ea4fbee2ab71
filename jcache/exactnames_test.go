package jcache_test

// An Exact source's consumer name does not depend on the order of the
// Kind calls or on whether the object sets TypeMeta: two unnamed sources
// of one type fail (they would share a consumer, one committing past what
// the other has not reconciled), and KindNamed gives each its own.

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr/testr"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/watchjournal/watchjournal/internal/testing/controlplane"
	"github.com/watchjournal/watchjournal/jcache"
)

// namesManager builds a manager on a journal cache in dir whose
// controller "names" has the sources kinds makes.
func namesManager(t *testing.T, cp *controlplane.ControlPlane, dir, ns string, kinds func(*jcache.ExactController) []*jcache.ExactSource) (ctrl.Manager, *mirror, []*jcache.ExactSource) {
	t.Helper()
	mgr := newManager(t, cp.RESTConfig(), ctrl.Options{
		NewCache: jcache.NewFunc(jcache.Options{Dir: dir, NoSync: true, Logger: testr.New(t)}),
	})
	rec := newMirror(ns, func(string) (reconcile.Result, error) { return reconcile.Result{}, nil })
	rec.c = mgr.GetClient()
	ex := jcache.Exact(mgr.GetCache(), "names")
	srcs := kinds(ex)
	b := ctrl.NewControllerManagedBy(mgr).Named("names").WithOptions(controller.Options{CacheSyncTimeout: 20 * time.Second})
	for _, s := range srcs {
		b = b.WatchesRawSource(s)
	}
	if err := b.Complete(ex.Reconciler(rec)); err != nil {
		t.Fatal(err)
	}
	return mgr, rec, srcs
}

func TestExact_TwoUnnamedSourcesOfOneTypeFail(t *testing.T) {
	withTypeMeta := &corev1.ConfigMap{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "ConfigMap"}}
	wantDuplicate(t, "two unnamed Exact sources of ConfigMaps (one with TypeMeta)", func(ex *jcache.ExactController) []*jcache.ExactSource {
		return []*jcache.ExactSource{
			ex.Kind(&corev1.ConfigMap{}, &handler.EnqueueRequestForObject{}),
			ex.Kind(withTypeMeta, &handler.EnqueueRequestForObject{}),
		}
	})
}

// A KindNamed name that spells a Kind source's type is that source's
// consumer too: refused, whichever source starts first.
func TestExact_NamedSourceSpellingAKindsConsumerFails(t *testing.T) {
	wantDuplicate(t, "a Kind of ConfigMaps and a KindNamed \"v1/ConfigMap\"", func(ex *jcache.ExactController) []*jcache.ExactSource {
		return []*jcache.ExactSource{
			ex.Kind(&corev1.ConfigMap{}, &handler.EnqueueRequestForObject{}),
			ex.KindNamed("v1/ConfigMap", &corev1.ConfigMap{}, &handler.EnqueueRequestForObject{}),
		}
	})
}

// wantDuplicate starts a manager whose controller has the sources kinds
// makes (what says which) and wants its Start to fail with
// ErrExactDuplicate.
func wantDuplicate(t *testing.T, what string, kinds func(ex *jcache.ExactController) []*jcache.ExactSource) {
	t.Helper()
	cp, kube, ns := setup(t)
	createMany(t, kube, ns, 3)
	mgr, _, _ := namesManager(t, cp, t.TempDir(), ns, kinds)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	err := mgr.Start(ctx)
	if err == nil || ctx.Err() != nil || !(errors.Is(err, jcache.ErrExactDuplicate) || strings.Contains(err.Error(), "would share a consumer")) {
		t.Fatalf("manager Start with %s = %v (ctx %v); want ErrExactDuplicate", what, err, ctx.Err())
	}
}

func TestExact_KindNamedGivesEachItsConsumer(t *testing.T) {
	cp, kube, ns := setup(t)
	const n = 5
	createMany(t, kube, ns, n)
	mgr, rec, srcs := namesManager(t, cp, t.TempDir(), ns, func(ex *jcache.ExactController) []*jcache.ExactSource {
		return []*jcache.ExactSource{
			ex.KindNamed("first", &corev1.ConfigMap{}, &handler.EnqueueRequestForObject{}),
			ex.KindNamed("second", &corev1.ConfigMap{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "ConfigMap"}}, &handler.EnqueueRequestForObject{}),
		}
	})
	run := runManager(t, mgr)
	defer run.stop()
	deadline := time.After(60 * time.Second)
	for {
		ok, s := atHead(srcs...)
		if ok && len(rec.names()) == n {
			break
		}
		select {
		case err := <-run.done:
			run.done <- err
			t.Fatalf("the manager stopped: %v; %s", err, s)
		case <-deadline:
			t.Fatalf("timed out: %d names reconciled; %s", len(rec.names()), s)
		case <-time.After(100 * time.Millisecond):
		}
	}
	if a, b := srcs[0].Consumer(), srcs[1].Consumer(); a != "exact/names/first" || b != "exact/names/second" {
		t.Fatalf("consumers %q and %q; want exact/names/first and exact/names/second", a, b)
	}
}

// A typed and a metadata-only source of one type read two files, each
// with its own consumer of the same name: both start and reach their
// heads (a consumer is claimed per file; with a standby, positions are
// published by name, so there the two would be refused).
func TestExact_TypedAndMetadataSourcesOfOneTypeStart(t *testing.T) {
	cp, kube, ns := setup(t)
	createSecrets(t, kube, ns, map[string]string{"a": "1", "b": "2"})
	mgr, _, srcs := namesManager(t, cp, t.TempDir(), ns, func(ex *jcache.ExactController) []*jcache.ExactSource {
		return []*jcache.ExactSource{
			ex.Kind(&corev1.Secret{}, &handler.EnqueueRequestForObject{}),
			ex.Kind(secretMeta(), &handler.EnqueueRequestForObject{}),
		}
	})
	run := runManager(t, mgr)
	defer run.stop()
	deadline := time.After(60 * time.Second)
	for {
		ok, s := atHead(srcs...)
		if ok {
			break
		}
		select {
		case err := <-run.done:
			run.done <- err
			t.Fatalf("the manager stopped: %v; %s", err, s)
		case <-deadline:
			t.Fatalf("timed out: %s", s)
		case <-time.After(100 * time.Millisecond):
		}
	}
	if a, b := srcs[0].Journal().Path(), srcs[1].Journal().Path(); a == b {
		t.Fatalf("both sources read %s; want the typed and the metadata-only file", a)
	}
}
