package cache_test

import (
	"context"
	stdjson "encoding/json"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/watchjournal/watchjournal/internal/testing/controlplane"
)

func marshal(v any) ([]byte, error) { return stdjson.Marshal(v) }

func cutKey(k string) (ns, name string, ok bool) {
	ns, name, ok = strings.Cut(k, "/")
	if !ok {
		return "", k, false
	}
	return ns, name, true
}

// startNamespace starts a control plane with namespace ns and returns it, a
// context that ends after timeout or with the test, and a clientset.
func startNamespace(t *testing.T, ns string, timeout time.Duration) (*controlplane.ControlPlane, context.Context, kubernetes.Interface) {
	t.Helper()
	cp := controlplane.StartT(t, controlplane.Options{})
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	t.Cleanup(cancel)
	kube := kubernetes.NewForConfigOrDie(cp.RESTConfig())
	if _, err := kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	return cp, ctx, kube
}
