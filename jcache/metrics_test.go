package jcache_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	dto "github.com/prometheus/client_model/go"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	crcache "sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/watchjournal/watchjournal/jcache"
	"github.com/watchjournal/watchjournal/metrics"
)

// syncedByResource gathers reg and returns watchjournal_synced by the
// resource label.
func syncedByResource(t *testing.T, reg *prometheus.Registry) map[string]float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatalf("Gather: %v", err)
	}
	out := map[string]float64{}
	for _, mf := range mfs {
		if mf.GetName() != "watchjournal_synced" {
			continue
		}
		for _, m := range mf.GetMetric() {
			out[label(m, metrics.ResourceLabel)] = m.GetGauge().GetValue()
		}
	}
	return out
}

func label(m *dto.Metric, name string) string {
	for _, l := range m.GetLabel() {
		if l.GetName() == name {
			return l.GetValue()
		}
	}
	return ""
}

// Ensure RegisterMetrics covers every journal file the cache has open, an
// informer added after the registration included, each labeled with its
// resource; a journal registered on the same registry with
// metrics.Register beside it gathers cleanly; a file closed by
// RemoveInformer leaves the series; a cache of another kind is refused.
func TestRegisterMetrics_EveryJournalOfTheCache(t *testing.T) {
	cp, kube, ns := setup(t)
	createCM(t, kube, ns, "a", nil, nil)
	r := startCache(t, jcache.NewFunc(jcache.Options{Dir: t.TempDir(), NoSync: true}), crcache.Options{}, cp)
	defer r.stop()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var cm corev1.ConfigMap
	if err := r.c.Get(ctx, client.ObjectKey{Namespace: ns, Name: "a"}, &cm); err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewRegistry()
	if err := jcache.RegisterMetrics(reg, r.c); err != nil {
		t.Fatal(err)
	}
	const cms, secrets = "configmaps.v1", "secrets.v1 --metadata-only"
	if got := syncedByResource(t, reg); len(got) != 1 || got[cms] != 1 {
		t.Fatalf("watchjournal_synced by resource = %v; want {%q: 1}", got, cms)
	}

	// A kind read after the registration joins.
	sl := &metav1.PartialObjectMetadataList{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "SecretList"}}
	if err := r.c.List(ctx, sl); err != nil {
		t.Fatal(err)
	}
	if got := syncedByResource(t, reg); len(got) != 2 || got[cms] != 1 || got[secrets] != 1 {
		t.Fatalf("after a Secret informer: watchjournal_synced by resource = %v; want %q and %q at 1", got, cms, secrets)
	}
	if n, err := testutil.GatherAndCount(reg, "watchjournal_index_objects"); err != nil || n != 2 {
		t.Errorf("watchjournal_index_objects series = %d, %v; want 2", n, err)
	}
	if problems, err := testutil.GatherAndLint(reg); err != nil || len(problems) != 0 {
		t.Errorf("lint: %v %v", problems, err)
	}

	// Gathered twice the counters stay (one collector per file, not one per scrape).
	if _, err := reg.Gather(); err != nil {
		t.Fatal(err)
	}

	// The removed informer's file closes: its series go.
	if err := r.c.RemoveInformer(ctx, secretMeta()); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		got := syncedByResource(t, reg)
		if len(got) == 1 && got[cms] == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("after RemoveInformer: watchjournal_synced by resource = %v; want only %q", got, cms)
		}
		time.Sleep(50 * time.Millisecond)
	}

	plain, err := crcache.New(cp.RESTConfig(), crcache.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if err := jcache.RegisterMetrics(prometheus.NewRegistry(), plain); !errors.Is(err, jcache.ErrNotJCache) {
		t.Errorf("RegisterMetrics of controller-runtime's cache = %v; want ErrNotJCache", err)
	}
}
