package jcache_test

import (
	"context"
	"fmt"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes"
	crcache "sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/watchjournal/watchjournal/jcache"
)

// createLabelled creates n ConfigMaps o0000… in ns, the names in want
// labelled sel=yes, the others sel=no, eight at a time.
func createLabelled(t *testing.T, kube kubernetes.Interface, ns string, n int, want func(i int) bool) {
	t.Helper()
	each(t, n, 8, func(i int) error {
		v := "no"
		if want(i) {
			v = "yes"
		}
		_, err := kube.CoreV1().ConfigMaps(ns).Create(context.Background(), &corev1.ConfigMap{
			ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("o%04d", i), Namespace: ns, Labels: map[string]string{"sel": v, "i": fmt.Sprint(i)}},
			Data:       map[string]string{"k": fmt.Sprint(i)}}, metav1.CreateOptions{})
		return err
	})
}

// listed is a List's outcome: the keys of its items in order, its
// Continue, and its error's text.
type listed struct {
	keys []string
	cont string
	err  string
}

func (l listed) String() string {
	return fmt.Sprintf("%d items %v, continue %q, error %q", len(l.keys), l.keys, l.cont, l.err)
}

func listOf(c client.Reader, newList func() client.ObjectList, opts ...client.ListOption) listed {
	list := newList()
	err := c.List(context.Background(), list, opts...)
	var out listed
	if err != nil {
		out.err = err.Error()
		return out
	}
	out.cont = list.GetContinue()
	items, err := meta.ExtractList(list)
	if err != nil {
		out.err = err.Error()
		return out
	}
	for _, o := range items {
		m, err := meta.Accessor(o)
		if err != nil {
			out.err = err.Error()
			return out
		}
		out.keys = append(out.keys, m.GetNamespace()+"/"+m.GetName())
	}
	return out
}

// TestCache_ListSelectsBeforeDecoding: over 1,000 ConfigMaps of which 10
// match, a List with a label selector decodes the 10 (typed,
// unstructured, metadata-only; one namespace and all), and a List with
// Limit 5 decodes 5, with controller-runtime's cache's results over the
// same objects: the same items (its order is a map's, so compared as
// sets; jcache's are in key order), its Continue, its errors for a
// Continue and for a non-exact field selector.
func TestCache_ListSelectsBeforeDecoding(t *testing.T) {
	cp, kube, ns := setup(t)
	const n = 1000
	match := func(i int) bool { return i%100 == 7 }
	createLabelled(t, kube, ns, n, match)
	var decodes atomic.Int64
	jr := startCache(t, jcache.NewFunc(jcache.WithReadDecodes(jcache.Options{Dir: t.TempDir(), NoSync: true}, &decodes)), crcache.Options{}, cp)
	defer jr.stop()
	cr := startCache(t, crcache.New, crcache.Options{}, cp)
	defer cr.stop()

	gvk := schema.GroupVersionKind{Version: "v1", Kind: "ConfigMapList"}
	kinds := map[string]func() client.ObjectList{
		"typed": func() client.ObjectList { return &corev1.ConfigMapList{} },
		"unstructured": func() client.ObjectList {
			u := &unstructured.UnstructuredList{}
			u.SetGroupVersionKind(gvk)
			return u
		},
		"metadata-only": func() client.ObjectList {
			m := &metav1.PartialObjectMetadataList{}
			m.SetGroupVersionKind(gvk)
			return m
		},
	}
	sel := client.MatchingLabelsSelector{Selector: labels.SelectorFromSet(labels.Set{"sel": "yes"})}
	var want []string
	for i := range n {
		if match(i) {
			want = append(want, fmt.Sprintf("%s/o%04d", ns, i))
		}
	}
	// Every informer synced and in both caches before counting.
	for name, newList := range kinds {
		for _, c := range []client.Reader{jr.c, cr.c} {
			waitList(t, c, newList, ns, n, name)
		}
	}

	for name, newList := range kinds {
		for _, scope := range []struct {
			name string
			opts []client.ListOption
		}{{"namespace", []client.ListOption{client.InNamespace(ns)}}, {"all namespaces", nil}} {
			t.Run(name+" "+scope.name, func(t *testing.T) {
				check := func(what string, most int64, opts ...client.ListOption) (got, crGot listed) {
					t.Helper()
					decodes.Store(0)
					got = listOf(jr.c, newList, opts...)
					if d := decodes.Load(); d > most {
						t.Errorf("%s: decoded %d objects, want at most %d", what, d, most)
					}
					crGot = listOf(cr.c, newList, opts...)
					if got.cont != crGot.cont || got.err != crGot.err {
						t.Errorf("%s: jcache's List = %v\ncontroller-runtime's = %v", what, got, crGot)
					}
					return got, crGot
				}
				opts := append(slices.Clone(scope.opts), sel)
				got, crGot := check("label selector", int64(len(want))+2, opts...)
				if !slices.Equal(got.keys, want) || !slices.Equal(slices.Sorted(slices.Values(crGot.keys)), want) {
					t.Errorf("label selector: jcache's List = %v\ncontroller-runtime's = %v\nwant %v", got, crGot, want)
				}

				opts = append(slices.Clone(scope.opts), client.Limit(5))
				got, crGot = check("Limit 5", 5+2, opts...)
				all := listOf(cr.c, newList, scope.opts...)
				if len(got.keys) != 5 || len(crGot.keys) != 5 || !slices.IsSorted(got.keys) {
					t.Errorf("Limit 5: jcache's List = %v\ncontroller-runtime's = %v", got, crGot)
				}
				for _, k := range got.keys {
					if !slices.Contains(all.keys, k) {
						t.Errorf("Limit 5: jcache's List has %s, which controller-runtime's cache does not", k)
					}
				}

				opts = append(slices.Clone(scope.opts), sel, client.Limit(3))
				got, crGot = check("label selector, Limit 3", 3+2, opts...)
				if !slices.Equal(got.keys, want[:3]) || len(crGot.keys) != 3 {
					t.Errorf("label selector, Limit 3: jcache's List = %v\ncontroller-runtime's = %v\nwant %v", got, crGot, want[:3])
				}

				opts = append(slices.Clone(scope.opts), sel, client.Limit(5), client.Continue(got.cont))
				check("Continue", 0, opts...)
			})
		}
	}
}

// waitList waits until c's List of newList's kind has the n labelled
// objects of ns.
func waitList(t *testing.T, c client.Reader, newList func() client.ObjectList, ns string, n int, what string) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	var last listed
	for {
		if last = listOf(c, newList, client.InNamespace(ns), client.HasLabels{"i"}); last.err == "" && len(last.keys) == n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: the cache's List did not reach %d items; last: %d items, error %q", what, n, len(last.keys), last.err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}
