package jcache_test

import (
	"context"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"
	crcache "sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/predicate"

	"github.com/watchjournal/watchjournal/jcache"
	"github.com/watchjournal/watchjournal/journal"
	"github.com/watchjournal/watchjournal/reconcile"
)

// deploymentMapper maps Deployments without discovery, so that a cache
// can start while the apiserver is down.
func deploymentMapper() meta.RESTMapper {
	m := meta.NewDefaultRESTMapper(nil)
	m.Add(schema.GroupVersionKind{Group: "apps", Version: "v1", Kind: "Deployment"}, meta.RESTScopeNamespace)
	return m
}

func deployment(ns, name string, labels map[string]string) *appsv1.Deployment {
	sel := map[string]string{"app": name}
	return &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: labels},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To[int32](1),
			Selector: &metav1.LabelSelector{MatchLabels: sel},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: sel},
				Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "example.invalid/c:1"}}},
			},
		},
	}
}

// TestCache_RestartOldObjectComplete: OnUpdate's old object right after a
// restart is the complete object the previous process stored (labels,
// spec, status, generation: equal to what the server last served), though
// retention had trimmed its record: a Deployment with status, updated
// (labels and spec, so generation) while no cache runs. The restarted
// handler gets the stored state from disk, then OnUpdate(old, new) whose
// old is that state and new the server's; controller-runtime's
// GenerationChangedPredicate and LabelChangedPredicate see the change.
func TestCache_RestartOldObjectComplete(t *testing.T) {
	cp, kube, ns := setup(t)
	dir := t.TempDir()
	newCache := jcache.NewFunc(jcache.WithRetentionInterval(jcache.Options{Dir: dir, NoSync: true, Retention: &journal.Retention{MaxEvents: 2},
		Loop: reconcile.Options{MinBackoff: 50 * time.Millisecond, MaxBackoff: 300 * time.Millisecond}}, 20*time.Millisecond))
	opts := crcache.Options{Mapper: deploymentMapper()}
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	deps := kube.AppsV1().Deployments(ns)
	d, err := deps.Create(ctx, deployment(ns, "d", map[string]string{"v": "1"}), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	// No controllers run: the status is the test's.
	d.Status = appsv1.DeploymentStatus{ObservedGeneration: d.Generation, Replicas: 1, ReadyReplicas: 1, AvailableReplicas: 1,
		Conditions: []appsv1.DeploymentCondition{{Type: appsv1.DeploymentAvailable, Status: corev1.ConditionTrue, Reason: "Test"}}}
	stored, err := deps.UpdateStatus(ctx, d, metav1.UpdateOptions{})
	if err != nil {
		t.Fatal(err)
	}

	// First process: d listed (offset 1), then two more Deployments;
	// retention keeps the last two events, so d's record is trimmed.
	r1 := startCache(t, newCache, opts, cp)
	rec := newRecorder()
	addHandler(t, ctx, r1.c, &appsv1.Deployment{}, deploymentEvents(rec))
	for _, n := range []string{"o1", "o2"} {
		if _, err := deps.Create(ctx, deployment(ns, n, nil), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	rec.waitFor(t, "the adds", hasAll("add d", "add o1", "add o2"))
	waitOffsets(t, dir, "d's record trimmed", func(first, head uint64) bool { return head >= 3 && first > 1 })
	r1.stop()

	// Changed while no cache runs: labels and spec (generation 2).
	d, err = deps.Get(ctx, "d", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	d.Labels["v"], d.Spec.Replicas = "2", ptr.To[int32](2)
	changed, err := deps.Update(ctx, d, metav1.UpdateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if changed.Generation != stored.Generation+1 {
		t.Fatalf("generation %d after a spec change, was %d", changed.Generation, stored.Generation)
	}

	// Second process: the apiserver down until the handler has had the
	// replay from disk, so that the change comes as an update after it.
	r2 := startWhileDown(t, newCache, opts, cp)
	defer r2.stop()
	type update struct{ old, new *appsv1.Deployment }
	updates := make(chan update, 10)
	rec2 := newRecorder()
	addHandler(t, ctx, r2.c, &appsv1.Deployment{}, deploymentEvents(rec2), crcache.BlockUntilSynced(false))
	reg := addHandler(t, ctx, r2.c, &appsv1.Deployment{}, toolscache.ResourceEventHandlerFuncs{UpdateFunc: func(o, n any) {
		if n.(*appsv1.Deployment).Name == "d" {
			updates <- update{o.(*appsv1.Deployment), n.(*appsv1.Deployment)}
		}
	}}, crcache.BlockUntilSynced(false))
	rec2.waitFor(t, "the replay from disk", hasAll("add d", "add o1", "add o2"))
	if err := cp.StartAPIServer(ctx); err != nil {
		t.Fatal(err)
	}
	var u update
	select {
	case u = <-updates:
	case <-ctx.Done():
		rec2.mu.Lock()
		defer rec2.mu.Unlock()
		t.Fatalf("no OnUpdate for d after the restart; events %q", rec2.events)
	}
	for _, c := range []struct {
		what      string
		got, want *appsv1.Deployment
	}{{"old", u.old, stored}, {"new", u.new, changed}} {
		g := c.got.DeepCopy()
		g.TypeMeta = metav1.TypeMeta{}
		if !equality.Semantic.DeepEqual(g, c.want) {
			t.Errorf("OnUpdate's %s object after the restart:\n%+v\nwant, as the server served it:\n%+v", c.what, g, c.want)
		}
	}
	if u.old.Labels["v"] != "1" || *u.old.Spec.Replicas != 1 || u.old.Status.ReadyReplicas != 1 || len(u.old.Status.Conditions) != 1 ||
		u.old.Generation != stored.Generation {
		t.Errorf("old object incomplete: labels %v, replicas %d, status %+v, generation %d", u.old.Labels, *u.old.Spec.Replicas, u.old.Status, u.old.Generation)
	}
	ue := event.UpdateEvent{ObjectOld: u.old, ObjectNew: u.new}
	if !(predicate.GenerationChangedPredicate{}).Update(ue) || !(predicate.LabelChangedPredicate{}).Update(ue) {
		t.Errorf("GenerationChangedPredicate %v, LabelChangedPredicate %v on the restart's update; want both true",
			(predicate.GenerationChangedPredicate{}).Update(ue), (predicate.LabelChangedPredicate{}).Update(ue))
	}
	if !toolscache.WaitForCacheSync(ctx.Done(), reg.HasSynced) {
		t.Fatal("handler never synced")
	}
}

// deploymentEvents records a Deployment handler's events as "add NAME",
// "update NAME", "delete NAME".
func deploymentEvents(rec *recorder) toolscache.ResourceEventHandlerFuncs {
	name := func(o any) string {
		if d, ok := o.(toolscache.DeletedFinalStateUnknown); ok {
			o = d.Obj
		}
		return o.(*appsv1.Deployment).Name
	}
	return toolscache.ResourceEventHandlerFuncs{
		AddFunc:    func(o any) { rec.add("add " + name(o)) },
		UpdateFunc: func(_, o any) { rec.add("update " + name(o)) },
		DeleteFunc: func(o any) { rec.add("delete " + name(o)) },
	}
}
