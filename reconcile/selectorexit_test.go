package reconcile_test

// What kube-apiserver sends on a watch when an object leaves the watch's
// label selector, with its watch cache off and on: recorded here because
// the journal's left-selector reason (reason.go) depends on it.

import (
	"context"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
)

// A label change that takes a ConfigMap out of a watch's label selector
// arrives as DELETED carrying the object as it was BEFORE the change (its
// old labels, which still match the selector) with the resourceVersion of
// the change; a real delete arrives the same way. So the DELETED alone
// cannot tell a selector exit from a deletion: the object must be looked up.
func TestAPIServer_SelectorExitSendsOldObject(t *testing.T) {
	for _, c := range envs {
		t.Run(c.name, func(t *testing.T) {
			e := c.env(t)
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			cms := e.kube.CoreV1().ConfigMaps(e.ns)
			cm, err := cms.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "a", Labels: map[string]string{"app": "in"}}}, metav1.CreateOptions{})
			if err != nil {
				t.Fatal(err)
			}
			w, err := cms.Watch(ctx, metav1.ListOptions{LabelSelector: "app=in", ResourceVersion: cm.ResourceVersion})
			if err != nil {
				t.Fatal(err)
			}
			defer w.Stop()
			cm.Labels["app"] = "out"
			upd, err := cms.Update(ctx, cm, metav1.UpdateOptions{})
			if err != nil {
				t.Fatal(err)
			}
			select {
			case ev := <-w.ResultChan():
				got, ok := ev.Object.(*corev1.ConfigMap)
				if ev.Type != watch.Deleted || !ok {
					t.Fatalf("got %s %T; want DELETED of the ConfigMap", ev.Type, ev.Object)
				}
				t.Logf("selector exit: DELETED labels %v resourceVersion %s (update's %s, before %s)", got.Labels, got.ResourceVersion, upd.ResourceVersion, cm.ResourceVersion)
				if got.Labels["app"] != "in" {
					t.Errorf("DELETED labels %v; want the old labels app=in", got.Labels)
				}
				if got.ResourceVersion != upd.ResourceVersion {
					t.Errorf("DELETED resourceVersion %s; want the update's %s", got.ResourceVersion, upd.ResourceVersion)
				}
			case <-ctx.Done():
				t.Fatal("no event after the label change")
			}
		})
	}
}
