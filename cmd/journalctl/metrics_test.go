package main

import (
	"context"
	"net/http"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/watchjournal/watchjournal/internal/testing/controlplane"
)

// Ensure watch --metrics-addr serves the journal's metrics on /metrics
// (the loop's after its list: synced, one object), and that without the
// flag nothing is served.
func TestWatch_MetricsAddr(t *testing.T) {
	dir, kubeconfig, db := watchFiles(t, fakeAPIServer(t))
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
	waitMetrics(t, url, want, 20*time.Second, stderr)
	stopCLI(t, cancel, code, stderr)
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
	const ns = "wj-metrics"
	cp := controlplane.StartT(t, controlplane.Options{})
	kube := cp.CreateNamespaceT(t, ns)
	createConfigMaps(t, kube, ns, "cm1")
	runCtx, cancel := context.WithCancel(context.Background())
	defer cancel()
	_, stderr, code := startCLI(runCtx, "watch", "configmaps,secrets", "-n", ns, "--dir", t.TempDir(),
		"--kubeconfig", cp.KubeconfigPath(), "--log-level", "info", "--metrics-addr", "127.0.0.1:0")
	stderr.waitForWithin(t, "/metrics", 60*time.Second)
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
	waitMetrics(t, url, want, 60*time.Second, stderr)
	stopCLI(t, cancel, code, stderr)
}
