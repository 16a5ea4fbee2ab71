package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"go.uber.org/zap"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/rest"

	"github.com/watchjournal/watchjournal/journal"
	"github.com/watchjournal/watchjournal/journal/inspect"
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
// configmaps in wj with lists[n], the last one again once they run out; a
// list is a metadata-only request (PartialObjectMetadataList) and the full
// requests after it.
func fakeAPIServerListing(t *testing.T, lists ...string) *httptest.Server {
	return fakeAPIServerWith(t, nil, lists...)
}

// fakeAPIServerWith is fakeAPIServerListing where intercept, when not
// nil, sees each request first, and answers it itself when it returns
// true.
func fakeAPIServerWith(t *testing.T, intercept func(http.ResponseWriter, *http.Request) bool, lists ...string) *httptest.Server {
	t.Helper()
	done := make(chan struct{})
	var mu sync.Mutex
	n := 0
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if intercept != nil && intercept(w, r) {
			return
		}
		w.Header().Set("Content-Type", "application/json")
		if doc, ok := discoveryDocs[r.URL.Path]; ok {
			fmt.Fprint(w, doc)
			return
		}
		if r.URL.Path != "/api/v1/namespaces/wj/configmaps" {
			http.NotFound(w, r)
			return
		}
		if r.URL.Query().Get("sendInitialEvents") == "true" {
			// A streaming list: refused, as kube-apiserver with the
			// WatchList feature gate off refuses it; the loop lists in
			// pages, which these tests look at.
			w.WriteHeader(http.StatusUnprocessableEntity)
			fmt.Fprint(w, `{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"ListOptions.meta.k8s.io \"\" is invalid: sendInitialEvents: Forbidden: sendInitialEvents is forbidden for watch unless the WatchList feature gate is enabled","reason":"Invalid","code":422}`)
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
		// A list starts with a metadata-only request; the full page that
		// follows it is the same snapshot.
		meta := strings.Contains(r.Header.Get("Accept"), "as=PartialObjectMetadataList")
		mu.Lock()
		if meta || n == 0 {
			n++
		}
		list := lists[min(n-1, len(lists)-1)]
		mu.Unlock()
		if meta {
			list = strings.Replace(list, `"kind":"ConfigMapList","apiVersion":"v1"`, `"kind":"PartialObjectMetadataList","apiVersion":"meta.k8s.io/v1"`, 1)
		}
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
	conf := defaultSettings()
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
		{"configmaps.v1", schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}, true},
		{"configmaps.v1.", schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}, true},
		{"cm.v1", schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}, true},
		{"namespaces.v1", schema.GroupVersionResource{Version: "v1", Resource: "namespaces"}, false},
		{"widgets.v1.example.com", schema.GroupVersionResource{Group: "example.com", Version: "v1", Resource: "widgets"}, false},
		{"deploy", schema.GroupVersionResource{Group: "apps", Version: "v1", Resource: "deployments"}, true},
		{"widgets", schema.GroupVersionResource{Group: "example.com", Version: "v1", Resource: "widgets"}, false},
	} {
		got, namespaced, err := resolve(context.Background(), cfg, tc.arg, zap.NewNop(), &conf)
		if err != nil || got != tc.want || namespaced != tc.namespaced {
			t.Errorf("resolve(%q) = %v, %v, %v; want %v, %v", tc.arg, got, namespaced, err, tc.want, tc.namespaced)
		}
	}
}

func TestResolve_Unknown(t *testing.T) {
	srv := fakeAPIServer(t)
	cfg := &rest.Config{Host: srv.URL}
	conf := defaultSettings()
	const served = " the apiserver serves no such resource (names look like configmaps, cm, deployments.apps, widgets.example.com)"
	for _, tc := range []struct {
		name, arg, want string
	}{
		{"a typo gets the plural as a suggestion", "configmapz",
			`unknown resource "configmapz":` + served + `; did you mean "configmaps"?`},
		{"a typo in a singular gets the plural", "namespase",
			`unknown resource "namespase":` + served + `; did you mean "namespaces"?`},
		{"outside the core group the suggestion names the group", "deploymentz",
			`unknown resource "deploymentz":` + served + `; did you mean "deployments.apps"?`},
		{"a typo with the group", "widgetz.example.com",
			`unknown resource "widgetz.example.com":` + served + `; did you mean "widgets.example.com"?`},
		{"nothing close, no suggestion", "gizmos", `unknown resource "gizmos":` + served},
		{"two letters are not close to a short name", "cx", `unknown resource "cx":` + served},
		{"a version the core group does not serve", "configmaps.v2", `unknown resource "configmaps.v2":` + served},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, _, err := resolve(context.Background(), cfg, tc.arg, zap.NewNop(), &conf)
			if err == nil || err.Error() != tc.want {
				t.Errorf("resolve(%q) error = %v; want %s", tc.arg, err, tc.want)
			}
		})
	}
}

func TestTransientDiscovery(t *testing.T) {
	refused := &url.Error{Op: "Get", URL: "https://127.0.0.1:6443/api", Err: &net.OpError{
		Op: "dial", Net: "tcp", Err: os.NewSyscallError("connect", syscall.ECONNREFUSED)}}
	gr := schema.GroupResource{}
	for _, tc := range []struct {
		name string
		err  error
		want bool
	}{
		{"connection refused", refused, true},
		{"connection cut mid-answer", &url.Error{Op: "Get", URL: "u", Err: io.ErrUnexpectedEOF}, true},
		{"503", apierrors.NewServiceUnavailable("starting"), true},
		{"500", apierrors.NewInternalError(errors.New("boom")), true},
		{"429", apierrors.NewTooManyRequests("slow down", 1), true},
		{"401", apierrors.NewUnauthorized("no"), false},
		{"403", apierrors.NewForbidden(gr, "", errors.New("no")), false},
		{"404", apierrors.NewNotFound(gr, ""), false},
		{"a certificate the client refuses", &url.Error{Op: "Get", URL: "u", Err: &tls.CertificateVerificationError{Err: x509.UnknownAuthorityError{}}}, false},
		{"a malformed server URL", &url.Error{Op: "Get", URL: "htps://x", Err: errors.New("unsupported protocol scheme")}, false},
		{"an answer that is not discovery", errors.New("invalid character '<' looking for beginning of value"), false},
	} {
		if got := transientDiscovery(tc.err); got != tc.want {
			t.Errorf("%s: transientDiscovery(%v) = %v; want %v", tc.name, tc.err, got, tc.want)
		}
	}
}

// fastDiscovery returns settings whose watch retries discovery quickly.
func fastDiscovery() settings {
	return tuned(func(c *settings) { c.discovery = discoveryBackoff{min: time.Millisecond, max: 4 * time.Millisecond} })
}

// captureOSStderr sends os.Stderr, where klog writes, to a pipe until the
// returned function restores it and returns what was written.
func captureOSStderr(t *testing.T) (restore func() string) {
	t.Helper()
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	old := os.Stderr
	os.Stderr = w
	got := make(chan string, 1)
	go func() { b, _ := io.ReadAll(r); got <- string(b) }() // exits when w closes
	var once sync.Once
	var out string
	restore = func() string {
		once.Do(func() { os.Stderr = old; w.Close(); out = <-got; r.Close() })
		return out
	}
	t.Cleanup(func() { restore() })
	return restore
}

// An apiserver that answers 503 at first: watch retries discovery, logs
// the failure once (not once per retry), and client-go's klog lines do
// not reach stderr.
func TestWatch_DiscoveryRetriedWhileUnavailable(t *testing.T) {
	_, kubeconfig, db := watchFiles(t, fakeAPIServerStarting(t, 3))
	klogOut := captureOSStderr(t)
	_, stderr, stop := startWatch(t, fastDiscovery(), db, kubeconfig)
	stop()
	if n := strings.Count(stderr.String(), "apiserver discovery failed"); n != 1 {
		t.Errorf("stderr logs the discovery failure %d times; want once:\n%s", n, stderr)
	}
	if !strings.Contains(stderr.String(), "apiserver discovery succeeded") {
		t.Errorf("stderr:\n%s\nwant the recovery logged", stderr)
	}
	if got := klogOut(); got != "" {
		t.Errorf("os.Stderr got klog's lines:\n%s\nwant nothing", got)
	}
}

// An apiserver that refuses connections: watch retries until interrupted,
// then exits 0.
func TestWatch_DiscoveryUnreachableUntilInterrupted(t *testing.T) {
	conf := fastDiscovery()
	srv := httptest.NewServer(http.NotFoundHandler())
	srv.Close() // its port now refuses connections
	_, kubeconfig, db := watchFiles(t, srv)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	_, stderr, code := startCLIWith(ctx, conf, "watch", "cm", "--db", db, "--kubeconfig", kubeconfig)
	stderr.waitFor(t, "connection refused")
	stopCLI(t, cancel, code, stderr)
	if n := strings.Count(stderr.String(), "apiserver discovery failed"); n != 1 {
		t.Errorf("stderr logs the discovery failure %d times; want once:\n%s", n, stderr)
	}
	if _, err := os.Stat(db); !os.IsNotExist(err) {
		t.Errorf("journal file after an interrupted discovery: %v; want none created", err)
	}
}

// Errors retrying cannot fix end watch at once, with one line.
func TestWatch_DiscoveryFailsAtOnce(t *testing.T) {
	conf := fastDiscovery()
	for _, tc := range []struct {
		name, arg string
		status    int
		want      string
	}{
		{"401", "cm", http.StatusUnauthorized, "apiserver discovery: 401 Unauthorized: the kubeconfig's credentials were refused"},
		{"403", "cm", http.StatusForbidden, "apiserver discovery: 403 Forbidden: the kubeconfig's user may not read discovery"},
		{"a resource the apiserver does not serve", "configmapz", 0,
			`unknown resource "configmapz": the apiserver serves no such resource (names look like configmaps, cm, ` +
				`deployments.apps, widgets.example.com); did you mean "configmaps"?`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := fakeAPIServerWith(t, func(w http.ResponseWriter, r *http.Request) bool {
				if tc.status == 0 {
					return false
				}
				http.Error(w, http.StatusText(tc.status), tc.status)
				return true
			}, listA)
			_, kubeconfig, db := watchFiles(t, srv)
			_, stderr, code := runCLIWith(conf, "watch", tc.arg, "--db", db, "--kubeconfig", kubeconfig)
			if code != 1 || !strings.HasPrefix(stderr, "journalctl: "+tc.want) || strings.Count(stderr, "\n") != 1 {
				t.Errorf("exit %d, stderr %q; want 1 and one line starting %q", code, stderr, "journalctl: "+tc.want)
			}
		})
	}
}

// A second watch of a file a watch is writing names the first one's pid,
// and exits 2.
func TestWatch_AlreadyRunning(t *testing.T) {
	_, kubeconfig, db := watchFiles(t, fakeAPIServer(t))
	_, _, stop := startWatch(t, defaultSettings(), db, kubeconfig)

	_, errOut, c := runCLI("watch", "cm", "--db", db, "--kubeconfig", kubeconfig)
	want := fmt.Sprintf("journalctl: another journalctl watch is already writing %s (pid %d); stop it first\n", db, os.Getpid())
	if c != 2 || errOut != want {
		t.Errorf("second watch: exit %d, stderr %q; want 2 and %q", c, errOut, want)
	}
	stop()
}

// --db in a directory that is missing, or where a directory stands,
// exits 2 with one line, like the other file errors.
func TestWatch_DBPathErrors(t *testing.T) {
	srv := fakeAPIServer(t)
	dir := tempDir(t)
	kubeconfig := writeKubeconfig(t, dir, srv.URL)
	notDir := filepath.Join(dir, "file")
	if err := os.WriteFile(notDir, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, db, want string
	}{
		{"a missing directory", "/nonexistent/dir/x.db", "--db /nonexistent/dir/x.db: directory /nonexistent/dir does not exist"},
		{"a file for a directory", filepath.Join(notDir, "x.db"), "is not a directory"},
		{"a directory for the file", dir, "is a directory"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, stderr, code := runCLI("watch", "cm", "--db", tc.db, "--kubeconfig", kubeconfig)
			if code != 2 || !strings.HasPrefix(stderr, "journalctl: ") || !strings.Contains(stderr, tc.want) ||
				strings.Count(stderr, "\n") != 1 {
				t.Errorf("exit %d, stderr %q; want 2 and one line saying %q", code, stderr, tc.want)
			}
		})
	}
}

// The apiserver's warnings reach watch's log, once each, not klog.
func TestWatch_APIServerWarningsLoggedOnce(t *testing.T) {
	srv := fakeAPIServerWith(t, func(w http.ResponseWriter, r *http.Request) bool {
		w.Header().Add("Warning", `299 - "v1 ConfigMap is deprecated"`)
		return false
	}, listA)
	_, kubeconfig, db := watchFiles(t, srv)
	klogOut := captureOSStderr(t)
	ctx, stderr, stop := startWatch(t, defaultSettings(), db, kubeconfig)
	if head, err := inspect.NewClient(inspect.SocketPath(db)).Wait(ctx, 0); err != nil || head != 1 {
		t.Fatalf("waiting for the list through the socket: head %d, %v; want 1", head, err)
	}
	stop()
	if n := strings.Count(stderr.String(), "apiserver warning\t"+`{"warning": "v1 ConfigMap is deprecated"}`); n != 1 {
		t.Errorf("stderr logs the warning %d times; want once:\n%s", n, stderr)
	}
	if got := klogOut(); got != "" {
		t.Errorf("os.Stderr got %q; want nothing", got)
	}
}

// watch logs durations as Go writes them and times in ISO 8601.
func TestNewLogger_Encoding(t *testing.T) {
	var buf strings.Builder
	log, err := newLogger(&buf, "info", 0)
	if err != nil {
		t.Fatal(err)
	}
	log.Info("backing off", zap.Duration("delay", 110*time.Millisecond), zap.Duration("took", 3346210*time.Nanosecond))
	got := buf.String()
	if !regexp.MustCompile(`^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}(Z|[+-]\d{4})\tinfo\tbacking off\t`).MatchString(got) ||
		!strings.Contains(got, `"delay": "110ms"`) || !strings.Contains(got, `"took": "3.34621ms"`) {
		t.Errorf("log line %q; want an ISO 8601 time and durations as 110ms and 3.34621ms", got)
	}
}

// watch against a fake apiserver: the namespace comes from the context, the
// list is journaled, reads go through the socket while it runs, and an
// interrupt stops it cleanly, socket removed. A watch of another resource
// into the same file then fails with exit 2.
func TestWatch(t *testing.T) {
	_, kubeconfig, db := watchFiles(t, fakeAPIServer(t))
	ctx, _, stop := startWatch(t, defaultSettings(), db, kubeconfig) // "watching" is logged once the socket serves
	head, err := inspect.NewClient(inspect.SocketPath(db)).Wait(ctx, 0)
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

	stop()
	if _, err := os.Stat(inspect.SocketPath(db)); !os.IsNotExist(err) {
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

// client-go's own klog lines land in watch's log (zap, on the command's
// stderr), named client-go, never on os.Stderr: its errors at V(1), shown
// by -v 1; without -v the discovery failure is logged once, by watch.
func TestWatch_KlogLinesInWatchLog(t *testing.T) {
	conf := fastDiscovery()
	for _, v := range []string{"0", "1"} {
		t.Run("-v "+v, func(t *testing.T) {
			_, kubeconfig, db := watchFiles(t, fakeAPIServerStarting(t, 1))
			klogOut := captureOSStderr(t)
			_, stderr, stop := startWatch(t, conf, db, kubeconfig, "-v", v)
			stop()
			if got := klogOut(); got != "" {
				t.Errorf("os.Stderr got klog's lines:\n%s\nwant nothing", got)
			}
			hasKlog := strings.Contains(stderr.String(), "\tclient-go\t")
			if hasKlog != (v == "1") {
				t.Errorf("-v %s: stderr:\n%s\nwant client-go's lines in it: %v", v, stderr, v == "1")
			}
		})
	}
}
