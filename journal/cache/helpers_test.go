package cache_test

import (
	"context"
	stdjson "encoding/json"
	"strings"
	"testing"
	"time"

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
	return cp, ctx, cp.CreateNamespaceT(t, ns)
}
