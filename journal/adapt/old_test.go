package adapt_test

// Handle's OnUpdate old object: the object as it was
// before the change, read from the key's previous event in the journal;
// metadata-only when retention trimmed that event.

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/cache"

	"github.com/watchjournal/watchjournal/internal/testing/schemafile"
	"github.com/watchjournal/watchjournal/journal"
	"github.com/watchjournal/watchjournal/journal/adapt"
)

// update is one OnUpdate as a filter sees it.
type update struct {
	name, oldRV, newRV   string
	oldLabels, newLabels map[string]string
	oldData              map[string]string
}

func (u update) String() string {
	return fmt.Sprintf("%s %s%v%v -> %s%v", u.name, u.oldRV, u.oldLabels, u.oldData, u.newRV, u.newLabels)
}

// updates runs Handle on a fresh consumer instance named consumer until n
// updates have been seen, and returns them.
func updates(t *testing.T, j *journal.Journal, consumer string, decode func([]byte) (runtime.Object, error), n int) []update {
	t.Helper()
	c, err := j.Consumers().Open(consumer)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	var got []update
	h := cache.ResourceEventHandlerFuncs{UpdateFunc: func(old, obj any) {
		o, _ := meta.Accessor(old)
		m, _ := meta.Accessor(obj)
		u := update{name: m.GetName(), oldRV: o.GetResourceVersion(), newRV: m.GetResourceVersion(),
			oldLabels: o.GetLabels(), newLabels: m.GetLabels()}
		if cm, ok := old.(*corev1.ConfigMap); ok {
			u.oldData = cm.Data
		}
		got = append(got, u)
		if len(got) == n {
			cancel()
		}
	}}
	if err := adapt.Handle(ctx, c, h, &adapt.Options{Decode: decode}); err != nil {
		t.Fatal(err)
	}
	if len(got) != n {
		t.Fatalf("Handle saw %d updates %v within 60s; want %d", len(got), got, n)
	}
	return got
}

// On a file: the old object is the previous event's, whether that event
// was handled in the same Handle, lies before the consumer's position
// (600 events of other keys back: one read at its PrevOffset), or
// was trimmed by retention (then metadata-only, with the previous
// resourceVersion).
func TestHandle_OnUpdate_OldObjectFromTheJournal(t *testing.T) {
	res := journal.Resource{GVR: schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}, Namespace: "demo",
		Kind: "ConfigMap", APIVersion: "v1"}
	obj := func(name, rv, tier string) []byte {
		return []byte(`{"kind":"ConfigMap","apiVersion":"v1","metadata":{"name":"` + name + `","namespace":"demo","uid":"u-` + name +
			`","resourceVersion":"` + rv + `","labels":{"tier":"` + tier + `"}},"data":{"rv":"` + rv + `"}}`)
	}
	ev := func(t journal.EventType, name, rv, prev, tier string) journal.Event {
		return journal.Event{Type: t, Key: "demo/" + name, UID: "u-" + name, ResourceVersion: rv, PrevResourceVersion: prev,
			Object: obj(name, rv, tier), Origin: journal.OriginWatch}
	}
	write := func(t *testing.T, j *journal.Journal, evs ...journal.Event) uint64 {
		t.Helper()
		var last uint64
		if err := j.Writer().Update(func(tx *journal.Tx) error {
			for i := range evs {
				off, err := tx.Append(&evs[i])
				if err != nil {
					return err
				}
				last = off
			}
			return tx.SetResourceVersion(evs[len(evs)-1].ResourceVersion)
		}); err != nil {
			t.Fatal(err)
		}
		return last
	}
	open := func(t *testing.T) *journal.Journal {
		j, err := journal.Open(filepath.Join(t.TempDir(), "j.db"), &journal.Options{Resource: &res, NoSync: true})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { j.Close() })
		return j
	}

	t.Run("previous event handled in the same Handle", func(t *testing.T) {
		j := open(t)
		write(t, j, ev(journal.Added, "a", "10", "", "web"), ev(journal.Modified, "a", "11", "10", "db"))
		for _, decode := range []func([]byte) (runtime.Object, error){nil, typed} {
			got := updates(t, j, fmt.Sprintf("h-%v", decode == nil), decode, 1)
			if u := got[0]; u.oldRV != "10" || u.oldLabels["tier"] != "web" || u.newLabels["tier"] != "db" {
				t.Fatalf("update %v; want old a@10 with tier=web, new tier=db", u)
			}
		}
		if got := updates(t, j, "typed", typed, 1); got[0].oldData["rv"] != "10" {
			t.Fatalf("typed update %v; want the old data rv=10", got[0])
		}
	})

	t.Run("previous event before the consumer's position, 600 events of other keys back", func(t *testing.T) {
		j := open(t)
		write(t, j, ev(journal.Added, "a", "10", "", "web"))
		var fill []journal.Event
		for i := 0; i < 600; i++ {
			fill = append(fill, ev(journal.Added, fmt.Sprintf("o%03d", i), "11", "", "x"))
		}
		head := write(t, j, fill...)
		if _, err := j.Consumers().Open("h"); err != nil {
			t.Fatal(err)
		}
		if err := j.Consumers().Commit("h", head); err != nil {
			t.Fatal(err)
		}
		write(t, j, ev(journal.Modified, "o599", "12", "11", "y"), ev(journal.Modified, "a", "13", "10", "db"))
		got := updates(t, j, "h", typed, 2)
		if got[0].oldLabels["tier"] != "x" || got[1].oldRV != "10" || got[1].oldLabels["tier"] != "web" || got[1].oldData["rv"] != "10" {
			t.Fatalf("updates %v; want o599's old tier=x, then a's old a@10 tier=web rv=10", got)
		}
	})

	t.Run("schema 2 file: its MODIFIEDs metadata-only, new ones whole", func(t *testing.T) {
		// The committed v2 file's MODIFIEDs of a (a@11 at offset 4, a@18
		// at 7) were written before records carried PrevOffset.
		b, err := os.ReadFile("../../testdata/journal/v2.db")
		if err != nil {
			t.Fatal(err)
		}
		path := filepath.Join(t.TempDir(), "v2.db")
		if err := os.WriteFile(path, b, 0o600); err != nil {
			t.Fatal(err)
		}
		r := schemafile.Resource
		j, err := journal.Open(path, &journal.Options{Resource: &r, NoSync: true})
		if err != nil {
			t.Fatal(err)
		}
		defer j.Close()
		got := updates(t, j, "h", typed, 2)
		for _, u := range got {
			if u.oldLabels != nil || u.oldData != nil {
				t.Fatalf("updates %v; want metadata-only old objects for records without PrevOffset", got)
			}
		}
		if got[0].oldRV != "8" || got[1].oldRV != "11" {
			t.Fatalf("updates %v; want old a@8, then a@11", got)
		}
		// a is live again (ADDED a@31, offset 14): a MODIFIED appended now
		// carries PrevOffset and gets the whole old object.
		e := journal.Event{Type: journal.Modified, Key: "wj/a", UID: "uid-a1", ResourceVersion: "40", PrevResourceVersion: "31",
			Origin: journal.OriginWatch, Object: []byte(`{"kind":"ConfigMap","apiVersion":"v1","metadata":{"name":"a","namespace":"wj","uid":"uid-a1","resourceVersion":"40","labels":{"app":"web","tier":"b"}}}`)}
		write(t, j, e)
		got = updates(t, j, "h2", typed, 3)
		if u := got[2]; u.oldRV != "31" || u.oldLabels["tier"] != "a" || u.oldData["v"] != "2" || u.newLabels["tier"] != "b" {
			t.Fatalf("update %v; want the whole old a@31 (tier=a, v=2), new tier=b", u)
		}
	})

	t.Run("previous event trimmed by retention: metadata-only", func(t *testing.T) {
		j := open(t)
		write(t, j, ev(journal.Added, "a", "10", "", "web"), ev(journal.Added, "b", "11", "", "web"))
		write(t, j, ev(journal.Modified, "a", "12", "10", "db"))
		if n, _, err := j.Writer().Trim(2, 1, 0, 0); err != nil || n != 1 {
			t.Fatalf("Trim = %d, %v; want 1 event trimmed", n, err)
		}
		got := updates(t, j, "h", typed, 1)
		if u := got[0]; u.oldRV != "10" || u.oldLabels != nil || u.oldData != nil || u.newLabels["tier"] != "db" {
			t.Fatalf("update %v; want a metadata-only old a@10 (no labels, no data)", u)
		}
	})
}

// The filter a controller writes for "did the labels change", against the
// real apiserver: a label change and a data-only change to one ConfigMap,
// the second handled by a new Handle in a new process (its previous event
// lies before the consumer's position). An old object without its labels
// would make the data-only change look like a label change.
func TestHandle_OnUpdate_LabelChangeFilter(t *testing.T) {
	ns := "labels"
	cp, ctx, kube := startNamespace(t, ns, 3*time.Minute)
	cms := kube.CoreV1().ConfigMaps(ns)
	if _, err := cms.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "a", Labels: map[string]string{"tier": "web"}},
		Data: map[string]string{"v": "1"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	patch := func(p string) {
		t.Helper()
		if _, err := cms.Patch(ctx, "a", types.MergePatchType, []byte(p), metav1.PatchOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	labelsChanged := func(u update) bool { return fmt.Sprint(u.oldLabels) != fmt.Sprint(u.newLabels) }
	path := filepath.Join(t.TempDir(), "j.db")
	res := configMaps(ns)

	// First process: the label change, handled with the ADDED before it.
	j, stop := runLoop(t, cp.RESTConfig(), path, res, synced)
	patch(`{"metadata":{"labels":{"tier":"db"}}}`)
	u := updates(t, j, "filter", typed, 1)[0]
	if !labelsChanged(u) || u.oldLabels["tier"] != "web" || u.newLabels["tier"] != "db" || u.oldData["v"] != "1" {
		t.Fatalf("label change: %v; want old tier=web v=1, new tier=db, the filter firing", u)
	}
	stop()

	// Second process: a data-only change.
	j, stop = runLoop(t, cp.RESTConfig(), path, res, resumed)
	defer stop()
	patch(`{"data":{"v":"2"}}`)
	u = updates(t, j, "filter", typed, 1)[0]
	if labelsChanged(u) || u.oldLabels["tier"] != "db" || u.oldData["v"] != "1" {
		t.Fatalf("data-only change after a restart: %v; want old tier=db v=1 and the filter quiet", u)
	}
}
