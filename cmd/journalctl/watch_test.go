package main

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/zap"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/rest"

	"github.com/watchjournal/watchjournal/journal"
)

// Discovery documents of the fake apiserver (legacy discovery, which
// client-go falls back to when the answer is plain application/json).
var discoveryDocs = map[string]string{
	"/api": `{"kind":"APIVersions","versions":["v1"],"serverAddressByClientCIDRs":[{"clientCIDR":"0.0.0.0/0","serverAddress":"127.0.0.1"}]}`,
	"/apis": `{"kind":"APIGroupList","apiVersion":"v1","groups":[
		{"name":"apps","versions":[{"groupVersion":"apps/v1","version":"v1"}],"preferredVersion":{"groupVersion":"apps/v1","version":"v1"}},
		{"name":"example.com","versions":[{"groupVersion":"example.com/v1","version":"v1"}],"preferredVersion":{"groupVersion":"example.com/v1","version":"v1"}}]}`,
	"/api/v1": `{"kind":"APIResourceList","groupVersion":"v1","resources":[
		{"name":"configmaps","singularName":"configmap","namespaced":true,"kind":"ConfigMap","verbs":["get","list","watch"],"shortNames":["cm"]},
		{"name":"namespaces","singularName":"namespace","namespaced":false,"kind":"Namespace","verbs":["get","list","watch"],"shortNames":["ns"]}]}`,
	"/apis/apps/v1": `{"kind":"APIResourceList","apiVersion":"v1","groupVersion":"apps/v1","resources":[
		{"name":"deployments","singularName":"deployment","namespaced":true,"kind":"Deployment","verbs":["get","list","watch"],"shortNames":["deploy"]}]}`,
	"/apis/example.com/v1": `{"kind":"APIResourceList","apiVersion":"v1","groupVersion":"example.com/v1","resources":[
		{"name":"widgets","singularName":"widget","namespaced":false,"kind":"Widget","verbs":["get","list","watch"]}]}`,
}

// listA is the fake apiserver's usual list: object a, at resourceVersion 5.
const listA = `{"kind":"ConfigMapList","apiVersion":"v1","metadata":{"resourceVersion":"5"},"items":[
	{"metadata":{"name":"a","namespace":"wj","uid":"u1","resourceVersion":"3"},"data":{"k":"v"}}]}`

// fakeAPIServer serves discovery, and for configmaps in namespace wj a list
// of one object (listA) and a watch that stays open and quiet.
func fakeAPIServer(t *testing.T) *httptest.Server { return fakeAPIServerListing(t, listA) }

// fakeAPIServerListing is fakeAPIServer answering the nth list of
// configmaps in wj with lists[n], the last one again once they run out.
func fakeAPIServerListing(t *testing.T, lists ...string) *httptest.Server {
	t.Helper()
	done := make(chan struct{})
	var mu sync.Mutex
	n := 0
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		if doc, ok := discoveryDocs[r.URL.Path]; ok {
			fmt.Fprint(w, doc)
			return
		}
		if r.URL.Path != "/api/v1/namespaces/wj/configmaps" {
			http.NotFound(w, r)
			return
		}
		if r.URL.Query().Get("watch") == "true" {
			w.(http.Flusher).Flush()
			select {
			case <-r.Context().Done():
			case <-done:
			}
			return
		}
		mu.Lock()
		list := lists[min(n, len(lists)-1)]
		n++
		mu.Unlock()
		fmt.Fprint(w, list)
	}))
	t.Cleanup(func() { close(done); srv.Close() })
	return srv
}

// writeKubeconfig writes a kubeconfig for server whose context's namespace
// is wj.
func writeKubeconfig(t *testing.T, dir, server string) string {
	t.Helper()
	path := filepath.Join(dir, "kubeconfig")
	kc := fmt.Sprintf(`apiVersion: v1
kind: Config
clusters: [{name: fake, cluster: {server: %q}}]
users: [{name: fake, user: {token: t}}]
contexts: [{name: fake, context: {cluster: fake, user: fake, namespace: wj}}]
current-context: fake
`, server)
	if err := os.WriteFile(path, []byte(kc), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestResolve(t *testing.T) {
	srv := fakeAPIServer(t)
	cfg := &rest.Config{Host: srv.URL}
	for _, tc := range []struct {
		arg        string
		want       schema.GroupVersionResource
		namespaced bool
	}{
		{"configmaps", schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}, true},
		{"configmap", schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}, true},
		{"cm", schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}, true},
		{"namespaces", schema.GroupVersionResource{Version: "v1", Resource: "namespaces"}, false},
		{"deployments.apps", schema.GroupVersionResource{Group: "apps", Version: "v1", Resource: "deployments"}, true},
		{"deployments.v1.apps", schema.GroupVersionResource{Group: "apps", Version: "v1", Resource: "deployments"}, true},
		{"deploy", schema.GroupVersionResource{Group: "apps", Version: "v1", Resource: "deployments"}, true},
		{"widgets", schema.GroupVersionResource{Group: "example.com", Version: "v1", Resource: "widgets"}, false},
	} {
		got, namespaced, err := resolve(context.Background(), cfg, tc.arg, zap.NewNop())
		if err != nil || got != tc.want || namespaced != tc.namespaced {
			t.Errorf("resolve(%q) = %v, %v, %v; want %v, %v", tc.arg, got, namespaced, err, tc.want, tc.namespaced)
		}
	}
	if _, _, err := resolve(context.Background(), cfg, "gadgets", zap.NewNop()); err == nil || !strings.Contains(err.Error(), `resource "gadgets"`) {
		t.Errorf(`resolve("gadgets") error = %v; want one naming the resource`, err)
	}
}

// watch against a fake apiserver: the namespace comes from the context, the
// list is journaled, reads go through the socket while it runs, and an
// interrupt stops it cleanly, socket removed. A watch of another resource
// into the same file then fails with exit 2.
func TestWatch(t *testing.T) {
	srv := fakeAPIServer(t)
	dir := tempDir(t)
	kubeconfig, db := writeKubeconfig(t, dir, srv.URL), filepath.Join(dir, "cm.db")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	_, stderr, code := startCLI(ctx, "watch", "cm", "--db", db, "--kubeconfig", kubeconfig)

	stderr.waitFor(t, "watching") // logged once the socket serves
	head, err := newSockSource(socketPath(db)).Wait(ctx, 0)
	if err != nil || head != 1 {
		t.Fatalf("waiting for the list through the socket: head %d, %v; want 1", head, err)
	}
	stdout, _, c := runCLI("events", "--db", db)
	if c != 0 || !strings.Contains(stdout, "ADDED  relist  wj/a  u1   3\n") {
		t.Errorf("events through the socket: exit %d, stdout\n%s\nwant wj/a ADDED by the initial list", c, stdout)
	}
	stdout, _, c = runCLI("stats", "--db", db)
	if c != 0 || !strings.Contains(stdout, "configmaps.v1 -n wj\n") || !strings.Contains(stdout, "phase  ") {
		t.Errorf("stats through the socket: exit %d, stdout\n%s\nwant configmaps in wj and the writer's phase", c, stdout)
	}

	cancel()
	if c := exitStatus(t, code); c != 0 {
		t.Errorf("watch exit %d after interrupt; want 0; stderr:\n%s", c, stderr)
	}
	if _, err := os.Stat(socketPath(db)); !os.IsNotExist(err) {
		t.Errorf("socket after exit: %v; want it removed", err)
	}
	j, err := journal.Open(db, &journal.Options{ReadOnly: true, Timeout: time.Second})
	if err != nil {
		t.Fatalf("file after watch exit: %v", err)
	}
	j.Close()

	_, errOut, c := runCLI("watch", "deployments.apps", "--db", db, "--kubeconfig", kubeconfig)
	if c != 2 || !strings.Contains(errOut, "file records another resource") || strings.Count(errOut, "journalctl: ") != 1 {
		t.Errorf("watch of another resource into the file: exit %d, stderr %q; want 2 and the mismatch", c, errOut)
	}
}
