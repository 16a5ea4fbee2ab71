package main

import (
	"context"
	"io"
	"net/http"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/watchjournal/watchjournal/internal/testing/controlplane"
)

// Ensure watch --metrics-addr serves the journal's metrics on /metrics
// (the loop's after its list: synced, one object), and that without the
// flag nothing is served.
func TestWatch_MetricsAddr(t *testing.T) {
	srv := fakeAPIServer(t)
	dir := tempDir(t)
	kubeconfig, db := writeKubeconfig(t, dir, srv.URL), filepath.Join(dir, "cm.db")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	_, stderr, code := startCLI(ctx, "watch", "cm", "-n", "wj", "--db", db, "--kubeconfig", kubeconfig, "--metrics-addr", "127.0.0.1:0")
	stderr.waitFor(t, "/metrics")
	url := regexp.MustCompile(`http://127\.0\.0\.1:\d+/metrics`).FindString(stderr.String())
	if url == "" {
		t.Fatalf("no metrics URL logged:\n%s", stderr)
	}
	want := []string{`watchjournal_synced{resource="configmaps.v1 -n wj"} 1`, `watchjournal_index_objects{resource="configmaps.v1 -n wj"} 1`,
		`watchjournal_lists_total{cause="initial",resource="configmaps.v1 -n wj"} 1`, "go_goroutines"}
	var body string
	deadline := time.Now().Add(20 * time.Second)
	for {
		resp, err := http.Get(url)
		if err == nil {
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			body = string(b)
		}
		missing := ""
		for _, w := range want {
			if !strings.Contains(body, w) {
				missing = w
			}
		}
		if missing == "" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("GET %s: %v; no %q in the last body:\n%s", url, err, missing, body)
		}
		time.Sleep(50 * time.Millisecond) // polling an HTTP endpoint: no condition to wait on
	}
	cancel()
	if c := exitStatus(t, code); c != 0 {
		t.Errorf("exit %d after interrupt; want 0; stderr:\n%s", c, stderr)
	}
	if _, err := http.Get(url); err == nil {
		t.Errorf("GET %s after watch exited: answered; want the listener closed", url)
	}

	// Off by default.
	ctx2, cancel2 := context.WithCancel(context.Background())
	defer cancel2()
	_, stderr2, code2 := startCLI(ctx2, "watch", "cm", "-n", "wj", "--db", filepath.Join(dir, "cm2.db"), "--kubeconfig", kubeconfig)
	stderr2.waitFor(t, "watching")
	cancel2()
	exitStatus(t, code2)
	if strings.Contains(stderr2.String(), "metrics") {
		t.Errorf("watch without --metrics-addr logged metrics:\n%s", stderr2)
	}
}

// Ensure watch configmaps,secrets --dir DIR --metrics-addr, against a real
// apiserver, serves both files' metrics on one /metrics, each series
// labeled with its resource, not refused ("serves one resource's
// metrics").
func TestWatch_MetricsAddr_SeveralResources(t *testing.T) {
	cp := controlplane.StartT(t, controlplane.Options{})
	ctx := context.Background()
	kube := kubernetes.NewForConfigOrDie(cp.RESTConfig())
	const ns = "wj-metrics"
	if _, err := kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := kube.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "cm1"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	runCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	_, stderr, code := startCLI(runCtx, "watch", "configmaps,secrets", "-n", ns, "--dir", t.TempDir(),
		"--kubeconfig", cp.KubeconfigPath(), "--log-level", "info", "--metrics-addr", "127.0.0.1:0")
	waitOutput(t, stderr, "/metrics", 60*time.Second)
	url := regexp.MustCompile(`http://127\.0\.0\.1:\d+/metrics`).FindString(stderr.String())
	if url == "" {
		t.Fatalf("no metrics URL logged:\n%s", stderr)
	}
	want := []string{
		`watchjournal_index_objects{resource="configmaps.v1 -n wj-metrics"} 1`,
		`watchjournal_synced{resource="configmaps.v1 -n wj-metrics"} 1`,
		`watchjournal_synced{resource="secrets.v1 -n wj-metrics --metadata-only"} 1`,
		`watchjournal_list_bytes_total{resource="secrets.v1 -n wj-metrics --metadata-only"}`,
	}
	var body string
	deadline := time.Now().Add(60 * time.Second)
	for {
		resp, err := http.Get(url)
		if err == nil {
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			body = string(b)
		}
		missing := ""
		for _, w := range want {
			if !strings.Contains(body, w) {
				missing = w
			}
		}
		if missing == "" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("GET %s: %v; no %q in the last body:\n%s\nstderr:\n%s", url, err, missing, body, stderr)
		}
		time.Sleep(50 * time.Millisecond) // polling an HTTP endpoint: no condition to wait on
	}
	cancel()
	if c := exitStatus(t, code); c != 0 {
		t.Errorf("exit %d after interrupt; want 0; stderr:\n%s", c, stderr)
	}
}
