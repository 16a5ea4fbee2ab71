package jcache_test

// An operator written for controller-runtime's cache, unchanged but for
// NewCache: For, Owns (metadata-only Secrets), Watches with a map function
// that lists through an index, and reads through mgr.GetClient(), against
// the real apiserver.

import (
	"context"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/watchjournal/watchjournal/jcache"
)

// parents reconciles ConfigMaps: each gets a Secret "<name>-child" it owns. It records the requests it sees.
type parents struct {
	c    client.Client
	mu   sync.Mutex
	seen map[types.NamespacedName]int
	ch   chan struct{}
}

// ensureChild creates the Secret "<name>-child" that cm owns (as its
// controller), unless it exists.
func ensureChild(ctx context.Context, c client.Client, cm *corev1.ConfigMap) error {
	s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: cm.Namespace, Name: cm.Name + "-child"}, StringData: map[string]string{"k": "v"}}
	if err := controllerutil.SetControllerReference(cm, s, c.Scheme()); err != nil {
		return err
	}
	if err := c.Create(ctx, s); err != nil && !apierrors.IsAlreadyExists(err) {
		return err
	}
	return nil
}

func (p *parents) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	var cm corev1.ConfigMap
	if err := p.c.Get(ctx, req.NamespacedName, &cm); err != nil {
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	if err := ensureChild(ctx, p.c, &cm); err != nil {
		return reconcile.Result{}, err
	}
	// Recorded once the Secret exists.
	p.mu.Lock()
	p.seen[req.NamespacedName]++
	close(p.ch)
	p.ch = make(chan struct{})
	p.mu.Unlock()
	return reconcile.Result{}, nil
}

// waitSeen waits until req has been reconciled more than n times.
func (p *parents) waitSeen(t *testing.T, req types.NamespacedName, n int, why string) int {
	t.Helper()
	deadline := time.After(30 * time.Second)
	for {
		p.mu.Lock()
		got, ch := p.seen[req], p.ch
		p.mu.Unlock()
		if got > n {
			return got
		}
		select {
		case <-ch:
		case <-deadline:
			t.Fatalf("%s: %s reconciled %d times, want more than %d", why, req, got, n)
		}
	}
}

func TestManager_BuilderOnJournalCache(t *testing.T) {
	cp, kube, ns := setup(t)
	mgr := newManager(t, cp.RESTConfig(), ctrl.Options{
		NewCache: jcache.NewFunc(jcache.Options{Dir: t.TempDir(), NoSync: true}),
	})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	// An index: ConfigMaps by the ServiceAccount their data names.
	if err := mgr.GetFieldIndexer().IndexField(ctx, &corev1.ConfigMap{}, "data.sa", func(o client.Object) []string {
		if sa := o.(*corev1.ConfigMap).Data["sa"]; sa != "" {
			return []string{sa}
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	p := &parents{c: mgr.GetClient(), seen: map[types.NamespacedName]int{}, ch: make(chan struct{})}
	bySA := handler.EnqueueRequestsFromMapFunc(func(ctx context.Context, o client.Object) []reconcile.Request {
		var l corev1.ConfigMapList
		if err := mgr.GetClient().List(ctx, &l, client.InNamespace(o.GetNamespace()), client.MatchingFields{"data.sa": o.GetName()}); err != nil {
			t.Errorf("list through the index: %v", err)
			return nil
		}
		var out []reconcile.Request
		for _, cm := range l.Items {
			out = append(out, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(&cm)})
		}
		return out
	})
	if err := ctrl.NewControllerManagedBy(mgr).Named("parents").
		For(&corev1.ConfigMap{}).
		Owns(&corev1.Secret{}, builder.OnlyMetadata).
		Watches(&corev1.ServiceAccount{}, bySA).
		Complete(p); err != nil {
		t.Fatal(err)
	}
	defer runManager(t, mgr).stop()

	parent := createCM(t, kube, ns, "p", map[string]string{"role": "parent"}, map[string]string{"sa": "sa1"})
	req := types.NamespacedName{Namespace: ns, Name: parent.Name}
	n := p.waitSeen(t, req, 0, "For")
	// The owned Secret exists (Reconcile records after creating it);
	// deleting it reconciles its owner (Owns, metadata only).
	if _, err := kube.CoreV1().Secrets(ns).Get(ctx, "p-child", metav1.GetOptions{}); err != nil {
		t.Fatalf("secret p-child: %v", err)
	}
	if err := kube.CoreV1().Secrets(ns).Delete(ctx, "p-child", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	n = p.waitSeen(t, req, n, "Owns: the owned Secret deleted")
	// A ServiceAccount maps to its ConfigMaps through the index.
	if _, err := kube.CoreV1().ServiceAccounts(ns).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "sa1"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	p.waitSeen(t, req, n, "Watches: the ServiceAccount the index maps to p")
	// Reads through mgr.GetClient() come from the cache's files.
	var cms corev1.ConfigMapList
	if err := mgr.GetClient().List(ctx, &cms, client.InNamespace(ns), client.MatchingLabels{"role": "parent"}); err != nil {
		t.Fatal(err)
	}
	if len(cms.Items) != 1 || cms.Items[0].Name != "p" {
		t.Fatalf("List role=parent: %v", cms.Items)
	}
}
