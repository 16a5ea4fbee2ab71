package reconcile_test

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/scheme"

	"github.com/watchjournal/watchjournal/journal"
	"github.com/watchjournal/watchjournal/reconcile"
)

// Non-ASCII text (label values must be ASCII; annotations and data need
// not), with characters JSON encoders like to escape.
const (
	oddNote = "héllo wörld ☃ 日本語 \u2028 <b>&amp;</b> \"kind\":"
	oddData = "Ünïcødé \"apiVersion\":\"v0\" ✓"
)

// Names and namespaces that collide with JSON field names
// (kind, apiversion, metadata, items), labels and data keys named kind and
// apiVersion, and non-ASCII annotations and data. Every object journaled —
// by the initial list, by the watch and by a relist after a 410 — carries
// kind ConfigMap and apiVersion v1, decodes through client-go's scheme, and
// keeps its text byte for byte. (A guess from an item's first 64 bytes
// would take a name or a namespace named kind for the field, skip kind and
// apiVersion, and leave such objects undecodable.)
func TestLoop_NamesLikeJSONFields_EveryObjectTypedAndDecodable(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	names := []string{"kind", "apiversion", "metadata", "items"}
	namespaces := append([]string{e.ns}, names...)
	for _, ns := range names {
		_, err := e.kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{})
		if err != nil && !apierrors.IsAlreadyExists(err) {
			t.Fatalf("create namespace %s: %v", ns, err)
		}
		t.Cleanup(func() { _ = e.kube.CoreV1().Namespaces().Delete(context.Background(), ns, metav1.DeleteOptions{}) })
	}
	selector := "wj-test=" + e.ns
	cm := func(ns, name string) *corev1.ConfigMap {
		return &corev1.ConfigMap{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns,
				Labels:      map[string]string{"wj-test": e.ns, "kind": "items", "apiVersion": "metadata"},
				Annotations: map[string]string{"note": oddNote, "kind": "apiVersion"}},
			Data: map[string]string{"kind": oddData, "apiVersion": "v0", "metadata": "{}", "items": "[]"},
		}
	}
	for _, ns := range namespaces {
		for _, n := range names {
			if _, err := e.kube.CoreV1().ConfigMaps(ns).Create(ctx, cm(ns, n), metav1.CreateOptions{}); err != nil {
				t.Fatalf("create %s/%s: %v", ns, n, err)
			}
		}
	}
	e.res.Namespace = ""
	e.res.LabelSelector = selector
	e.start(nil, testOptions(t)) // PageSize 2
	e.waitStatus("initial list", watching(1))
	const listed = 20
	if h := e.head(); h != listed {
		t.Fatalf("journal head after the initial list = %d; want %d", h, listed)
	}
	checkTyped(t, e, 1)

	// The watch: updates and a create in the namespace named kind.
	touch := func(ns, name string) {
		t.Helper()
		c, err := e.kube.CoreV1().ConfigMaps(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		c.Annotations["touched"] = "✓ " + name
		if _, err := e.kube.CoreV1().ConfigMaps(ns).Update(ctx, c, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	touch("kind", "kind")
	touch("metadata", "items")
	if _, err := e.kube.CoreV1().ConfigMaps("kind").Create(ctx, cm("kind", "kind-2"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	e.waitHead(listed + 3)
	checkTyped(t, e, listed+1)

	// A relist after a 410.
	e.proxy.Cut()
	touch("kind", "apiversion")
	touch("items", "kind")
	touch(e.ns, "metadata")
	e.compact()
	e.proxy.Heal()
	e.waitStatus("relist after 410", func(s reconcile.Status) bool { return s.Gone >= 1 && watching(2)(s) })
	got, _ := e.eventsFrom(listed + 4)
	sort.Strings(got)
	equal(t, "events of the relist", got, []string{"MODIFIED items/kind relist",
		"MODIFIED kind/apiversion relist", "MODIFIED metadata relist"}) // eventsFrom drops e.ns
	checkTyped(t, e, 1)

	list, err := e.kube.CoreV1().ConfigMaps("").List(ctx, metav1.ListOptions{LabelSelector: selector})
	if err != nil {
		t.Fatal(err)
	}
	var want, have []string
	for _, o := range list.Items {
		want = append(want, fmt.Sprintf("%s/%s %s %s", o.Namespace, o.Name, o.UID, o.ResourceVersion))
	}
	entries, err := e.j.ScanIndex("", 1000)
	if err != nil {
		t.Fatal(err)
	}
	for _, en := range entries {
		have = append(have, fmt.Sprintf("%s %s %s", en.Key, en.UID, en.ResourceVersion))
	}
	sort.Strings(want)
	equal(t, "index", have, want)
}

// checkTyped asserts that every object journaled from offset from on has
// kind ConfigMap and apiVersion v1, decodes through client-go's scheme into
// the ConfigMap its key names, and kept its non-ASCII text.
func checkTyped(t *testing.T, e *env, from uint64) {
	t.Helper()
	evs, err := readAll(e.j, from)
	if err != nil {
		t.Fatal(err)
	}
	dec := scheme.Codecs.UniversalDeserializer()
	for _, ev := range evs {
		if ev.Object == nil {
			if ev.Type != journal.Deleted {
				t.Errorf("%s %s (%s) has no object", ev.Type, ev.Key, ev.Origin)
			}
			continue
		}
		obj, gvk, err := dec.Decode(ev.Object, nil, nil)
		if err != nil {
			t.Errorf("%s %s (%s): decode through the scheme: %v\n%.300s", ev.Type, ev.Key, ev.Origin, err, ev.Object)
			continue
		}
		c, ok := obj.(*corev1.ConfigMap)
		if !ok || gvk.Kind != "ConfigMap" || gvk.GroupVersion().String() != "v1" {
			t.Errorf("%s %s (%s) decoded as %v %T; want v1 ConfigMap", ev.Type, ev.Key, ev.Origin, gvk, obj)
			continue
		}
		if c.Namespace+"/"+c.Name != ev.Key || c.Annotations["note"] != oddNote || c.Data["kind"] != oddData || c.Labels["kind"] != "items" {
			t.Errorf("%s %s (%s) = %s/%s, note %q, data %q, label %q; want the key's object with its text",
				ev.Type, ev.Key, ev.Origin, c.Namespace, c.Name, c.Annotations["note"], c.Data["kind"], c.Labels["kind"])
		}
		if !strings.HasPrefix(ev.Key, c.Namespace+"/") {
			t.Errorf("key %s for namespace %s", ev.Key, c.Namespace)
		}
	}
}
