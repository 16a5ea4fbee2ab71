package controlplane

import (
	"context"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// Under RunWithSpare, a test after the first gets a spare started ahead
// of it: its own control plane, not the one before it (which its test
// stopped), with nothing the earlier test made; options other than the
// defaults start their own.
func TestStartT_SpareIsAFreshControlPlane(t *testing.T) {
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "left-behind"}}
	var first *ControlPlane
	t.Run("first", func(t *testing.T) {
		first = StartT(t, Options{})
		kube := kubernetes.NewForConfigOrDie(first.RESTConfig())
		if _, err := kube.CoreV1().Namespaces().Create(context.Background(), ns, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	})
	pool.mu.Lock()
	before := pool.taken
	pool.mu.Unlock()
	t.Run("second", func(t *testing.T) {
		c := StartT(t, Options{})
		pool.mu.Lock()
		taken := pool.taken - before
		pool.mu.Unlock()
		if taken != 1 {
			t.Fatalf("%d spares taken by the second StartT; want 1", taken)
		}
		if c == first || c.URL() == first.URL() {
			t.Fatalf("the second test got the first test's control plane (%s)", c.URL())
		}
		if !first.stopped.Load() {
			t.Fatal("the first test's control plane still runs after its test")
		}
		kube := kubernetes.NewForConfigOrDie(c.RESTConfig())
		_, err := kube.CoreV1().Namespaces().Get(context.Background(), ns.Name, metav1.GetOptions{})
		if !apierrors.IsNotFound(err) {
			t.Fatalf("namespace %s in the spare: %v; want NotFound", ns.Name, err)
		}
	})
	t.Run("own options", func(t *testing.T) {
		pool.mu.Lock()
		before := pool.taken
		pool.mu.Unlock()
		c := StartT(t, Options{WatchCache: true})
		pool.mu.Lock()
		taken := pool.taken - before
		pool.mu.Unlock()
		if taken != 0 || c.opts.WatchCache != true {
			t.Fatalf("StartT with WatchCache took %d spares (watch cache %v); want its own", taken, c.opts.WatchCache)
		}
	})
}
