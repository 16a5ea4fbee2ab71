package cache_test

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"sort"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/watchjournal/watchjournal/journal"
	"github.com/watchjournal/watchjournal/journal/cache"
)

var cmRes = journal.Resource{GVR: schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}, Kind: "ConfigMap", APIVersion: "v1"}

// fill opens a journal with ConfigMaps ns/name labelled as given.
func fill(t *testing.T, cms map[string]map[string]string) *journal.Journal {
	t.Helper()
	j, err := journal.Open(filepath.Join(t.TempDir(), "j.db"), &journal.Options{Resource: &cmRes, NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = j.Close() })
	if err := j.Settings().KeepObjects(); err != nil {
		t.Fatal(err)
	}
	keys := make([]string, 0, len(cms))
	for k := range cms {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	err = j.Writer().Update(func(tx *journal.Tx) error {
		for i, k := range keys {
			ns, name, _ := cutKey(k)
			cm := &corev1.ConfigMap{}
			cm.Kind, cm.APIVersion = "ConfigMap", "v1"
			cm.Name, cm.Namespace, cm.Labels = name, ns, cms[k]
			cm.UID, cm.ResourceVersion = types.UID("u-"+k), fmt.Sprint(i+1)
			cm.Data = map[string]string{"k": k}
			b, _ := marshal(cm)
			if _, err := tx.Append(&journal.Event{Type: journal.Added, Key: k, UID: string(cm.UID), ResourceVersion: cm.ResourceVersion, Object: b, Origin: journal.OriginWatch}); err != nil {
				return err
			}
		}
		return tx.SetResourceVersion(fmt.Sprint(len(keys)))
	})
	if err != nil {
		t.Fatal(err)
	}
	return j
}

func names(items []corev1.ConfigMap) []string {
	var out []string
	for _, cm := range items {
		out = append(out, cm.Namespace+"/"+cm.Name)
	}
	return out
}

// Ensure that List honours namespaces, label selectors and the
// metadata.name/metadata.namespace field selectors, typed and
// unstructured, and the lister gives the same; an unsupported field is
// ErrUnsupportedField; an absent object is NotFound.
func TestReader_SelectorsAndNamespaces(t *testing.T) {
	j := fill(t, map[string]map[string]string{
		"a/x": {"app": "web"}, "a/y": {"app": "db"}, "ab/x": {"app": "web"}, "b/x": {"app": "web", "tier": "1"},
	})
	r := cache.NewReader(j, scheme.Scheme)
	ctx := context.Background()
	web := labels.SelectorFromSet(labels.Set{"app": "web"})
	for _, tc := range []struct {
		name string
		opts []client.ListOption
		want string
	}{
		{"all", nil, "[a/x a/y ab/x b/x]"},
		{"namespace a (not ab)", []client.ListOption{client.InNamespace("a")}, "[a/x a/y]"},
		{"label", []client.ListOption{client.MatchingLabelsSelector{Selector: web}}, "[a/x ab/x b/x]"},
		{"label in namespace", []client.ListOption{client.InNamespace("a"), client.MatchingLabels{"app": "web"}}, "[a/x]"},
		{"label exists", []client.ListOption{client.HasLabels{"tier"}}, "[b/x]"},
		{"field name", []client.ListOption{client.MatchingFields{"metadata.name": "x"}}, "[a/x ab/x b/x]"},
		{"field namespace", []client.ListOption{client.MatchingFieldsSelector{Selector: fields.OneTermEqualSelector("metadata.namespace", "b")}}, "[b/x]"},
		{"limit", []client.ListOption{client.Limit(2)}, "[a/x a/y]"},
		{"continue", []client.ListOption{client.Limit(2), client.Continue("a/y")}, "[ab/x b/x]"},
	} {
		var l corev1.ConfigMapList
		if err := r.List(ctx, &l, tc.opts...); err != nil || fmt.Sprint(names(l.Items)) != tc.want {
			t.Errorf("%s: typed List = %v, %v; want %s", tc.name, names(l.Items), err, tc.want)
		}
		var u unstructured.UnstructuredList
		u.SetAPIVersion("v1")
		u.SetKind("ConfigMapList")
		var got []string
		err := r.List(ctx, &u, tc.opts...)
		for _, it := range u.Items {
			got = append(got, it.GetNamespace()+"/"+it.GetName())
		}
		if err != nil || fmt.Sprint(got) != tc.want {
			t.Errorf("%s: unstructured List = %v, %v; want %s", tc.name, got, err, tc.want)
		}
	}
	var l corev1.ConfigMapList
	if err := r.List(ctx, &l, client.MatchingFields{"data.k": "x"}); !errors.Is(err, cache.ErrUnsupportedField) {
		t.Errorf("List with a data field selector = %v; want ErrUnsupportedField", err)
	}
	var cm corev1.ConfigMap
	if err := r.Get(ctx, client.ObjectKey{Namespace: "b", Name: "x"}, &cm); err != nil || cm.Data["k"] != "b/x" || cm.Labels["tier"] != "1" {
		t.Errorf("Get b/x = %+v, %v; want its object", cm, err)
	}
	if err := r.Get(ctx, client.ObjectKey{Namespace: "b", Name: "nope"}, &cm); !apierrors.IsNotFound(err) {
		t.Errorf("Get b/nope = %v; want NotFound", err)
	}
	var sec corev1.Secret
	if err := r.Get(ctx, client.ObjectKey{Namespace: "b", Name: "x"}, &sec); err == nil {
		t.Errorf("Get of a Secret from a ConfigMap journal succeeded; want an error naming the kind")
	}

	lister := cache.NewLister(j, cache.Typed[*corev1.ConfigMap](scheme.Scheme))
	got, err := lister.Namespace("a").List(web)
	if err != nil || len(got) != 1 || got[0].Name != "x" || got[0].Namespace != "a" {
		t.Errorf("lister a List(app=web) = %v, %v; want [a/x]", got, err)
	}
	all, err := lister.List(labels.Everything())
	if err != nil || len(all) != 4 {
		t.Errorf("lister List(everything) = %d items, %v; want 4", len(all), err)
	}
	if cm, err := lister.Namespace("ab").Get("x"); err != nil || cm.Data["k"] != "ab/x" {
		t.Errorf("lister ab Get(x) = %v, %v; want ab/x", cm, err)
	}
	if _, err := lister.Namespace("a").Get("z"); !apierrors.IsNotFound(err) {
		t.Errorf("lister a Get(z) = %v; want NotFound", err)
	}
	ul := cache.NewLister(j, cache.Unstructured)
	if u, err := ul.Namespace("a").Get("y"); err != nil || u.GetLabels()["app"] != "db" {
		t.Errorf("unstructured lister a Get(y) = %v, %v; want a/y", u, err)
	}
}

// Ensure that a reader over a file that kept no objects while retention
// trimmed a live key's latest event names the keys it has no object for,
// and Get and List of them fail with ErrNoObject rather than serve
// nothing; a key whose latest event is retained reads at once.
func TestReader_MissingObjects(t *testing.T) {
	j, err := journal.Open(filepath.Join(t.TempDir(), "j.db"), &journal.Options{Resource: &cmRes, NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	defer j.Close()
	err = j.Writer().Update(func(tx *journal.Tx) error {
		_, err := tx.Append(&journal.Event{Type: journal.Added, Key: "a/old", UID: "u1", ResourceVersion: "1", Object: []byte(`{"kind":"ConfigMap","apiVersion":"v1","metadata":{"name":"old","namespace":"a"}}`), Origin: journal.OriginWatch})
		if err != nil {
			return err
		}
		_, err = tx.Append(&journal.Event{Type: journal.Added, Key: "b/new", UID: "u2", ResourceVersion: "2", Object: []byte(`{"kind":"ConfigMap","apiVersion":"v1","metadata":{"name":"new","namespace":"b"}}`), Origin: journal.OriginWatch})
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	if n, _, err := j.Writer().Trim(2, 10, 0, 0); err != nil || n != 1 {
		t.Fatalf("Trim = %d, %v; want a/old's event", n, err)
	}
	r := cache.NewReader(j, scheme.Scheme)
	ctx := context.Background()
	var nw corev1.ConfigMap
	if err := r.Get(ctx, client.ObjectKey{Namespace: "b", Name: "new"}, &nw); err != nil || nw.Name != "new" {
		t.Errorf("Get b/new, its event retained = %v, %v; want it", nw.Name, err)
	}
	if m, err := r.Missing(ctx, "a"); err != nil || fmt.Sprint(m) != "[a/old]" {
		t.Errorf("Missing(a) = %v, %v; want [a/old]", m, err)
	}
	var cm corev1.ConfigMap
	if err := r.Get(ctx, client.ObjectKey{Namespace: "a", Name: "old"}, &cm); !errors.Is(err, journal.ErrNoObject) {
		t.Errorf("Get a/old = %v; want ErrNoObject", err)
	}
	var l corev1.ConfigMapList
	if err := r.List(ctx, &l, client.InNamespace("a")); !errors.Is(err, journal.ErrNoObject) {
		t.Errorf("List a = %v; want ErrNoObject", err)
	}
}

// Ensure that a reader used before the file knows its kind (before the
// first list) says so, and works once the kind is known: the first
// error is not kept.
func TestReader_BeforeTheKindIsKnown(t *testing.T) {
	res := journal.Resource{GVR: cmRes.GVR}
	j, err := journal.Open(filepath.Join(t.TempDir(), "j.db"), &journal.Options{Resource: &res, NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	defer j.Close()
	r := cache.NewReader(j, scheme.Scheme)
	ctx := context.Background()
	var cm corev1.ConfigMap
	if err := r.Get(ctx, client.ObjectKey{Namespace: "a", Name: "x"}, &cm); !errors.Is(err, journal.ErrNoKind) {
		t.Fatalf("Get before the kind is known = %v; want ErrNoKind", err)
	}
	err = j.Writer().Update(func(tx *journal.Tx) error {
		_, err := tx.Append(&journal.Event{Type: journal.Added, Key: "a/x", UID: "u1", ResourceVersion: "1", Object: []byte(`{"kind":"ConfigMap","apiVersion":"v1","metadata":{"name":"x","namespace":"a"},"data":{"k":"v"}}`), Origin: journal.OriginWatch})
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := r.Get(ctx, client.ObjectKey{Namespace: "a", Name: "x"}, &cm); err != nil || cm.Data["k"] != "v" {
		t.Fatalf("Get once the kind is known = %+v, %v; want a/x", cm, err)
	}
}
