package main

import (
	"bufio"
	"context"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"

	"github.com/watchjournal/watchjournal/internal/controlplane"
)

// child is the operator as a separate process; it counts the reconcile
// lines it prints.
type child struct {
	mu         sync.Mutex
	reconciled map[string]int
	changed    chan struct{}
	exited     chan struct{}
}

func startChild(t *testing.T, bin string, args ...string) *child {
	t.Helper()
	cmd := exec.Command(bin, args...)
	c := &child{reconciled: map[string]int{}, changed: make(chan struct{}), exited: make(chan struct{})}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = &logWriter{t: t}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		defer close(c.exited)
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			if k, ok := strings.CutPrefix(sc.Text(), "reconcile "); ok {
				c.mu.Lock()
				c.reconciled[k]++
				close(c.changed)
				c.changed = make(chan struct{})
				c.mu.Unlock()
			}
		}
		_ = cmd.Wait()
	}()
	t.Cleanup(func() { _ = cmd.Process.Kill(); <-c.exited })
	return c
}

// waitReconciled waits until key has been reconciled more than n times,
// and returns the count.
func (c *child) waitReconciled(t *testing.T, key string, n int, why string) int {
	t.Helper()
	deadline := time.After(60 * time.Second)
	for {
		c.mu.Lock()
		got, ch := c.reconciled[key], c.changed
		c.mu.Unlock()
		if got > n {
			return got
		}
		select {
		case <-ch:
		case <-c.exited:
			t.Fatalf("%s: the operator exited", why)
		case <-deadline:
			t.Fatalf("%s: %s reconciled %d times, want more than %d", why, key, got, n)
		}
	}
}

type logWriter struct{ t *testing.T }

func (w *logWriter) Write(p []byte) (int, error) {
	w.t.Logf("operator: %s", strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

// waitSecret waits for an ADDED of the Secret name (a watch without a
// resourceVersion starts with the objects that exist).
func waitSecret(t *testing.T, kube kubernetes.Interface, ns, name string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	w, err := kube.CoreV1().Secrets(ns).Watch(ctx, metav1.ListOptions{FieldSelector: "metadata.name=" + name})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	for ev := range w.ResultChan() {
		if ev.Type == watch.Added {
			return
		}
	}
	t.Fatalf("no Secret %s/%s", ns, name)
}

// The example operator, on the journal cache, against the real apiserver:
// For with a label predicate, Owns (metadata-only Secrets: deleting one
// reconciles its owner) and Watches through a field index; an unlabelled
// ConfigMap gets no Secret.
func TestCacheOperator_BuilderOnTheJournalCache(t *testing.T) {
	cp := controlplane.StartT(t, controlplane.Options{})
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	bin := filepath.Join(t.TempDir(), "cacheoperator")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	kube := kubernetes.NewForConfigOrDie(cp.RESTConfig())
	ns := "cop"
	if _, err := kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	for name, labels := range map[string]map[string]string{"a": {label: "true"}, "b": nil} {
		if _, err := kube.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Labels: labels},
			Data:       map[string]string{"serviceAccount": "sa1"}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	c := startChild(t, bin, "--kubeconfig", cp.KubeconfigPath(), "-n", ns, "--dir", filepath.Join(t.TempDir(), "cache"))
	n := c.waitReconciled(t, ns+"/a", 0, "For")
	waitSecret(t, kube, ns, "a-secret")
	if err := kube.CoreV1().Secrets(ns).Delete(ctx, "a-secret", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	n = c.waitReconciled(t, ns+"/a", n, "Owns: the Secret deleted")
	waitSecret(t, kube, ns, "a-secret")
	if _, err := kube.CoreV1().ServiceAccounts(ns).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "sa1"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	c.waitReconciled(t, ns+"/a", n, "Watches: the ServiceAccount mapped through the index")
	// b is mapped by the index too (its data names sa1), so it is
	// reconciled once and gets no Secret (no label).
	c.waitReconciled(t, ns+"/b", 0, "Watches: b")
	if _, err := kube.CoreV1().Secrets(ns).Get(ctx, "b-secret", metav1.GetOptions{}); err == nil {
		t.Error("b, without the label, got a Secret")
	}
}
