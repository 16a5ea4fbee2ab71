package cache_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/watchjournal/watchjournal/journal"
	"github.com/watchjournal/watchjournal/journal/cache"
)

// A Reader in place of controller-runtime's cache: Get and List read the
// journal file. Here the journal is filled by hand; in a program the
// writer is a reconcile.Loop (create the Reader before it runs).
func ExampleNewReader() {
	dir, _ := os.MkdirTemp("", "example")
	defer os.RemoveAll(dir)
	res := journal.Resource{Kind: "ConfigMap", APIVersion: "v1"}
	res.GVR.Version, res.GVR.Resource = "v1", "configmaps"
	j, _ := journal.Open(filepath.Join(dir, "cm.db"), &journal.Options{Resource: &res, NoSync: true})
	defer j.Close()

	r := cache.NewReader(j, scheme.Scheme) // the file keeps objects from now on

	cm := corev1.ConfigMap{TypeMeta: metav1.TypeMeta{Kind: "ConfigMap", APIVersion: "v1"},
		ObjectMeta: metav1.ObjectMeta{Namespace: "demo", Name: "web", UID: "u1", ResourceVersion: "7", Labels: map[string]string{"app": "web"}},
		Data:       map[string]string{"color": "blue"}}
	b, _ := json.Marshal(&cm)
	_ = j.Writer().Update(func(tx *journal.Tx) error {
		_, err := tx.Append(&journal.Event{Type: journal.Added, Key: "demo/web", UID: "u1", ResourceVersion: "7", Object: b, Origin: journal.OriginWatch})
		return err
	})

	ctx := context.Background()
	var got corev1.ConfigMap
	head, err := r.GetAt(ctx, client.ObjectKey{Namespace: "demo", Name: "web"}, &got)
	fmt.Println(got.Data["color"], "as of offset", head, err)

	var list corev1.ConfigMapList
	_ = r.List(ctx, &list, client.InNamespace("demo"), client.MatchingLabels{"app": "web"})
	fmt.Println(len(list.Items), "matching")

	lister := cache.NewLister(j, cache.Typed[*corev1.ConfigMap](scheme.Scheme))
	cms, _ := lister.Namespace("demo").List(labels.Everything())
	fmt.Println(cms[0].Name)
	// Output:
	// blue as of offset 1 <nil>
	// 1 matching
	// web
}
