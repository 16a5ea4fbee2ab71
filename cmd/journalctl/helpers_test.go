package main

// Helpers the command's tests share: a watch run in the background against
// the fake apiserver, a trimmed test journal, ConfigMaps to fill a real
// apiserver's namespace, and waits on a run's output or metrics. Each
// fails the test with the last state it saw.

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// watchFiles returns a new short temporary directory, a kubeconfig for srv
// in it, and the path of cm.db in it.
func watchFiles(t *testing.T, srv *httptest.Server) (dir, kubeconfig, db string) {
	t.Helper()
	dir = tempDir(t)
	return dir, writeKubeconfig(t, dir, srv.URL), filepath.Join(dir, "cm.db")
}

// writeTrimmedTestJournal creates a closed journal file holding
// testEvents, trimmed by retention to offsets 3 and 4, and returns its path.
func writeTrimmedTestJournal(t *testing.T) string {
	t.Helper()
	path := filepath.Join(tempDir(t), "j.db")
	j := openJournal(t, path)
	appendEvents(t, j, "12", testEvents()...)
	if _, _, err := j.Writer().Trim(3, 10, 0, 0); err != nil {
		t.Fatal(err)
	}
	j.Close()
	return path
}

// startWatch runs journalctl watch cm --db db --kubeconfig kubeconfig,
// then extra, with conf in the background, and waits until it logs
// "watching". ctx ends with the test or stop; stop interrupts the watch
// and fails the test unless it exits 0.
func startWatch(t *testing.T, conf settings, db, kubeconfig string, extra ...string) (ctx context.Context, stderr *output, stop func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	args := append([]string{"watch", "cm", "--db", db, "--kubeconfig", kubeconfig}, extra...)
	_, stderr, code := startCLIWith(ctx, conf, args...)
	stderr.waitFor(t, "watching")
	return ctx, stderr, func() { t.Helper(); stopCLI(t, cancel, code, stderr) }
}

// stopCLI interrupts a background run by cancel and fails the test,
// printing stderr, unless it exits 0.
func stopCLI(t *testing.T, cancel context.CancelFunc, code <-chan int, stderr *output) {
	t.Helper()
	cancel()
	if c := exitStatus(t, code); c != 0 {
		t.Errorf("exit %d after interrupt; want 0; stderr:\n%s", c, stderr)
	}
}

// fakeAPIServerStarting is fakeAPIServer answering its first n requests
// for /api with 503, as an apiserver that is still starting.
func fakeAPIServerStarting(t *testing.T, n int) *httptest.Server {
	t.Helper()
	var mu sync.Mutex
	return fakeAPIServerWith(t, func(w http.ResponseWriter, r *http.Request) bool {
		mu.Lock()
		defer mu.Unlock()
		if r.URL.Path != "/api" || n == 0 {
			return false
		}
		n--
		http.Error(w, "starting", http.StatusServiceUnavailable)
		return true
	}, listA)
}

// createConfigMaps creates an empty ConfigMap of each name in namespace ns.
func createConfigMaps(t *testing.T, kube kubernetes.Interface, ns string, names ...string) {
	t.Helper()
	for _, name := range names {
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name}}
		if _, err := kube.CoreV1().ConfigMaps(ns).Create(context.Background(), cm, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
}

// waitMetrics polls url until its body holds every line of want, for up to
// d; on a timeout it fails the test with the last body and stderr.
func waitMetrics(t *testing.T, url string, want []string, d time.Duration, stderr *output) {
	t.Helper()
	var body string
	deadline := time.Now().Add(d)
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
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("GET %s: %v; no %q in the last body:\n%s\nstderr:\n%s", url, err, missing, body, stderr)
		}
		time.Sleep(50 * time.Millisecond) // polling an HTTP endpoint: no condition to wait on
	}
}

// waitMatch waits until ok holds for the output, for up to d; on a timeout
// it fails the test with the output and want, which says what ok awaits.
func (o *output) waitMatch(t *testing.T, d time.Duration, ok func(string) bool, want string) {
	t.Helper()
	timeout := time.NewTimer(d)
	defer timeout.Stop()
	for {
		o.mu.Lock()
		has, ch := ok(o.buf.String()), o.changed
		o.mu.Unlock()
		if has {
			return
		}
		select {
		case <-ch:
		case <-timeout.C:
			t.Fatalf("output %q; %s", o.String(), want)
		}
	}
}
