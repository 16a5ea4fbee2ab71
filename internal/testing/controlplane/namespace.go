package controlplane

// A test's own namespace: most tests start a control plane, then create a
// namespace to work in with an admin client they go on using.

import (
	"context"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// CreateNamespaceT creates namespace name with an admin client of c (as
// RESTConfig configures it) and returns that client; it fails t when the
// apiserver refuses the namespace.
func (c *ControlPlane) CreateNamespaceT(t testing.TB, name string) *kubernetes.Clientset {
	t.Helper()
	kube := kubernetes.NewForConfigOrDie(c.RESTConfig())
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}
	if _, err := kube.CoreV1().Namespaces().Create(context.Background(), ns, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create namespace %s: %v", name, err)
	}
	return kube
}
