package jcache_test

import (
	"context"
	"k8s.io/apimachinery/pkg/fields"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	toolscache "k8s.io/client-go/tools/cache"
	crcache "sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/watchjournal/watchjournal/jcache"
)

// TestCache_UnregisteredIndexErrorIsControllerRuntimes: a List through an
// index that was never added, first or after one that was, and a
// ByIndex on the informer's indexer, fail on the journal cache with
// the error text controller-runtime's own cache gives for the same call.
func TestCache_UnregisteredIndexErrorIsControllerRuntimes(t *testing.T) {
	cp, kube, ns := setup(t)
	createCM(t, kube, ns, "a", nil, map[string]string{"a": "x"})
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	byA := func(o client.Object) []string { return []string{o.(*corev1.ConfigMap).Data["a"]} }
	calls := []struct {
		name string
		do   func(crcache.Cache) error
	}{
		{"List, the only field unindexed", func(c crcache.Cache) error {
			return c.List(ctx, &corev1.ConfigMapList{}, client.MatchingFields{"data.none": "x"})
		}},
		{"List in a namespace, the only field unindexed", func(c crcache.Cache) error {
			return c.List(ctx, &corev1.ConfigMapList{}, client.InNamespace(ns), client.MatchingFields{"data.none": "x"})
		}},
		// Two fields in a set order: controller-runtime's text depends on
		// the position of the unindexed one (client-go's for the first,
		// its own for a later one), and a MatchingFields map has none.
		{"List, the second field unindexed", func(c crcache.Cache) error {
			return c.List(ctx, &corev1.ConfigMapList{}, client.MatchingFieldsSelector{Selector: fields.AndSelectors(
				fields.OneTermEqualSelector("data.a", "x"), fields.OneTermEqualSelector("data.z", "y"))})
		}},
		{"List, the first of two fields unindexed", func(c crcache.Cache) error {
			return c.List(ctx, &corev1.ConfigMapList{}, client.MatchingFieldsSelector{Selector: fields.AndSelectors(
				fields.OneTermEqualSelector("data.z", "y"), fields.OneTermEqualSelector("data.a", "x"))})
		}},
		{"ByIndex", func(c crcache.Cache) error {
			inf, err := c.GetInformer(ctx, &corev1.ConfigMap{})
			if err != nil {
				return err
			}
			_, err = inf.(toolscache.SharedIndexInformer).GetIndexer().ByIndex("none", "x")
			return err
		}},
	}
	got := map[string][]string{}
	for name, newCache := range map[string]crcache.NewCacheFunc{
		"controller-runtime": crcache.New,
		"jcache":             jcache.NewFunc(jcache.Options{Dir: t.TempDir(), NoSync: true}),
	} {
		c, err := newCache(cp.RESTConfig(), crcache.Options{})
		if err != nil {
			t.Fatal(err)
		}
		if err := c.IndexField(ctx, &corev1.ConfigMap{}, "data.a", byA); err != nil {
			t.Fatal(err)
		}
		cctx, stop := context.WithCancel(ctx)
		done := make(chan error, 1)
		go func() { done <- c.Start(cctx) }()
		if !c.WaitForCacheSync(cctx) {
			t.Fatalf("%s: the cache did not start", name)
		}
		for _, call := range calls {
			err := call.do(c)
			if err == nil {
				t.Fatalf("%s: %s: no error", name, call.name)
			}
			got[name] = append(got[name], err.Error())
		}
		stop()
		if err := <-done; err != nil {
			t.Errorf("%s: Start = %v", name, err)
		}
	}
	for i, call := range calls {
		if want, j := got["controller-runtime"][i], got["jcache"][i]; j != want {
			t.Errorf("%s: jcache's error %q; controller-runtime's %q", call.name, j, want)
		}
	}
}
