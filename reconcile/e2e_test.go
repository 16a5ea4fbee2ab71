package reconcile_test

// End-to-end tests against a real kube-apiserver and etcd on loopback
// (internal/testing/controlplane). One control plane serves the whole package; tests
// run one at a time, each in its own namespace, and wait on conditions.

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr/testr"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/rest"

	"github.com/watchjournal/watchjournal/internal/testing/controlplane"
	"github.com/watchjournal/watchjournal/journal"
	"github.com/watchjournal/watchjournal/reconcile"
)

var (
	cp      *controlplane.ControlPlane
	cpErr   error
	cpSkip  string
	cpMu    sync.Mutex
	cpStart sync.Once
)

func TestMain(m *testing.M) {
	if os.Getenv(childEnv) != "" {
		os.Exit(childMain())
	}
	code := m.Run()
	if cp != nil {
		cp.Stop()
	}
	for _, p := range []*otherPlane{watchCachePlane, gateOffPlane} {
		if p.cp != nil {
			p.cp.Stop()
		}
	}
	for _, d := range cpDirs { // a control plane's etcd data is hundreds of MiB; one a run leaked before
		_ = os.RemoveAll(d)
	}
	os.Exit(code)
}

// cpDirs are the directories of the package's shared control planes, removed
// by TestMain once they stopped (t.TempDir would outlive none of the tests
// that share them).
var (
	cpDirs   []string
	cpDirsMu sync.Mutex
)

// cpTempDir makes a directory for a shared control plane and records it for
// TestMain to remove.
func cpTempDir(prefix string) string {
	dir, _ := os.MkdirTemp("", prefix)
	cpDirsMu.Lock()
	defer cpDirsMu.Unlock()
	cpDirs = append(cpDirs, dir)
	return dir
}

// controlPlane starts the package's control plane on first use, or skips
// the test when the binaries are missing (unless
// WATCHJOURNAL_REQUIRE_CONTROLPLANE=1, then it fails).
func controlPlane(t *testing.T) *controlplane.ControlPlane {
	t.Helper()
	cpStart.Do(func() {
		bin, err := controlplane.BinDir(controlplane.Options{})
		if err == nil {
			if _, err = os.Stat(filepath.Join(bin, "kube-apiserver")); err != nil {
				cpSkip = "kube-apiserver not built: run `make controlplane`"
				return
			}
		}
		dir := cpTempDir("wj-cp-")
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		cp, cpErr = controlplane.Start(ctx, dir, controlplane.Options{ExtraTokens: map[string]string{readerToken: "wj-reader"}})
	})
	if cpSkip != "" {
		if os.Getenv("WATCHJOURNAL_REQUIRE_CONTROLPLANE") == "1" {
			t.Fatal(cpSkip)
		}
		t.Skip(cpSkip)
	}
	if cpErr != nil {
		t.Fatalf("control plane: %v", cpErr)
	}
	return cp
}

// otherPlane is a control plane besides the package's, with other
// options, started on first use and shared by the tests that ask for it;
// TestMain stops it.
type otherPlane struct {
	prefix string // of its directory's name
	opts   controlplane.Options
	once   sync.Once
	cp     *controlplane.ControlPlane
	err    error
}

// env is newEnv on p's control plane; it skips or fails as the package's
// control plane does when the binaries are missing.
func (p *otherPlane) env(t *testing.T) *env {
	t.Helper()
	controlPlane(t)
	p.once.Do(func() {
		dir := cpTempDir(p.prefix)
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		p.cp, p.err = controlplane.Start(ctx, filepath.Join(dir, "cp"), p.opts)
	})
	if p.err != nil {
		t.Fatal(p.err)
	}
	saved := cp
	cp = p.cp
	defer func() { cp = saved }()
	return newEnv(t)
}

// env is one test's namespace, proxy, journal and loop.
type env struct {
	t     *testing.T
	cp    *controlplane.ControlPlane
	ns    string
	kube  kubernetes.Interface
	proxy *controlplane.Proxy
	path  string
	res   journal.Resource
	// keyring, when set, seals the journal's sensitive objects (start).
	keyring *journal.Keyring

	j      *journal.Journal
	loop   *reconcile.Loop
	cancel context.CancelFunc
	done   chan error
}

var nsSeq int

func newEnv(t *testing.T) *env {
	t.Helper()
	c := controlPlane(t)
	cpMu.Lock()
	nsSeq++
	ns := fmt.Sprintf("wj-%d-%s", nsSeq, strings.Map(func(r rune) rune {
		if r >= 'a' && r <= 'z' || r >= '0' && r <= '9' {
			return r
		}
		return '-'
	}, strings.ToLower(t.Name())))
	cpMu.Unlock()
	if len(ns) > 60 {
		ns = ns[:60]
	}
	ns = strings.TrimRight(ns, "-")
	kube := c.CreateNamespaceT(t, ns)
	p, err := controlplane.NewProxy(c.APIServerAddr())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Close)
	e := &env{t: t, cp: c, ns: ns, kube: kube, proxy: p, path: filepath.Join(t.TempDir(), "journal.db"),
		res: journal.Resource{GVR: schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}, Namespace: ns}}
	t.Cleanup(e.stop)
	return e
}

func testOptions(t *testing.T) reconcile.Options {
	return reconcile.Options{
		PageSize: 2, MinBackoff: 20 * time.Millisecond, MaxBackoff: 300 * time.Millisecond,
		Logger: testr.New(t),
	}
}

// pagedOptions are testOptions for a test of the paginated list (list.go):
// its faults are injected into list pages, which a streaming list
// (stream.go) does not request.
func pagedOptions(t *testing.T) reconcile.Options {
	o := testOptions(t)
	o.ListMode = reconcile.ListModePaginated
	return o
}

// start opens the journal and runs a loop through the proxy (or cfg).
func (e *env) start(cfg *rest.Config, opts reconcile.Options) {
	e.t.Helper()
	if cfg == nil {
		cfg = e.cp.ProxiedRESTConfig(e.proxy)
	}
	j, err := journal.Open(e.path, &journal.Options{Resource: &e.res, NoSync: true, Keyring: e.keyring})
	if err != nil {
		e.t.Fatalf("journal.Open: %v", err)
	}
	l, err := reconcile.New(cfg, j, opts)
	if err != nil {
		e.t.Fatalf("reconcile.New: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	e.j, e.loop, e.cancel, e.done = j, l, cancel, make(chan error, 1)
	go func() { e.done <- l.Run(ctx) }()
}

// wrapped returns the config through e's proxy with wrap in its transport.
func (e *env) wrapped(wrap func(http.RoundTripper) http.RoundTripper) *rest.Config {
	cfg := e.cp.ProxiedRESTConfig(e.proxy)
	cfg.Wrap(wrap)
	return cfg
}

// startListed starts the loop as start does, waits until it watches after
// its initial list, and returns the journal's head offset.
func (e *env) startListed(cfg *rest.Config, opts reconcile.Options) uint64 {
	e.t.Helper()
	e.start(cfg, opts)
	e.waitStatus("initial list", watching(1))
	return e.head()
}

// stop ends the loop cleanly and closes the journal.
func (e *env) stop() {
	if e.loop == nil {
		return
	}
	e.cancel()
	if err := <-e.done; err != nil {
		e.t.Errorf("Run = %v; want nil after cancel", err)
	}
	_ = e.j.Close()
	e.loop, e.j = nil, nil
}

// waitStatus waits until cond holds for the loop's status.
func (e *env) waitStatus(what string, cond func(reconcile.Status) bool) reconcile.Status {
	e.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if err := e.loop.WaitFor(ctx, cond); err != nil {
		e.t.Fatalf("waiting for %s: %v; status %+v", what, err, e.loop.Status())
	}
	return e.loop.Status()
}

// waitHead waits until the journal's head offset reaches at least off.
func (e *env) waitHead(off uint64) {
	e.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if err := e.j.Wait(ctx, off-1); err != nil {
		h, _ := e.j.Head()
		e.t.Fatalf("waiting for offset %d: %v (head %d, status %+v)", off, err, h, e.loop.Status())
	}
}

func (e *env) head() uint64 {
	h, err := e.j.Head()
	if err != nil {
		e.t.Fatal(err)
	}
	return h
}

// eventsFrom returns "TYPE name origin" for the events from offset from.
func (e *env) eventsFrom(from uint64) ([]string, []journal.Event) {
	e.t.Helper()
	evs, err := readAll(e.j, from)
	if err != nil {
		e.t.Fatal(err)
	}
	var s []string
	for _, ev := range evs {
		s = append(s, fmt.Sprintf("%s %s %s", ev.Type, strings.TrimPrefix(ev.Key, e.ns+"/"), ev.Origin))
	}
	return s, evs
}

// expectEvents fails the test, naming what, unless the events from offset
// from are want, each "TYPE name origin" as eventsFrom gives them.
func (e *env) expectEvents(what string, from uint64, want []string) {
	e.t.Helper()
	got, _ := e.eventsFrom(from)
	equal(e.t, what, got, want)
}

func (e *env) create(name string) *corev1.ConfigMap {
	e.t.Helper()
	cm, err := e.kube.CoreV1().ConfigMaps(e.ns).Create(context.Background(),
		&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name}, Data: map[string]string{"v": "0"}}, metav1.CreateOptions{})
	if err != nil {
		e.t.Fatalf("create %s: %v", name, err)
	}
	return cm
}

// createAll creates a ConfigMap of each name, as create does.
func (e *env) createAll(names ...string) {
	e.t.Helper()
	for _, n := range names {
		e.create(n)
	}
}

func (e *env) update(name string) *corev1.ConfigMap {
	e.t.Helper()
	ctx := context.Background()
	cm, err := e.kube.CoreV1().ConfigMaps(e.ns).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		e.t.Fatalf("get %s: %v", name, err)
	}
	cm.Data["v"] = fmt.Sprint(time.Now().UnixNano())
	cm, err = e.kube.CoreV1().ConfigMaps(e.ns).Update(ctx, cm, metav1.UpdateOptions{})
	if err != nil {
		e.t.Fatalf("update %s: %v", name, err)
	}
	return cm
}

func (e *env) delete(name string) {
	e.t.Helper()
	if err := e.kube.CoreV1().ConfigMaps(e.ns).Delete(context.Background(), name, metav1.DeleteOptions{}); err != nil {
		e.t.Fatalf("delete %s: %v", name, err)
	}
}

func (e *env) compact() {
	e.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := e.cp.Compact(ctx); err != nil {
		e.t.Fatalf("compact: %v", err)
	}
}

// checkIndex asserts that the index equals the server's list of the env's
// resource: same keys, UIDs and resourceVersions (a metadata-only list:
// that is all it compares).
func (e *env) checkIndex(j *journal.Journal) {
	e.t.Helper()
	md := metadata.NewForConfigOrDie(e.cp.RESTConfig()).Resource(e.res.GVR).Namespace(e.ns)
	list, err := md.List(context.Background(), metav1.ListOptions{LabelSelector: e.res.LabelSelector})
	if err != nil {
		e.t.Fatal(err)
	}
	var want []string
	for _, o := range list.Items {
		want = append(want, fmt.Sprintf("%s/%s %s %s", o.GetNamespace(), o.GetName(), o.GetUID(), o.GetResourceVersion()))
	}
	sort.Strings(want)
	entries, err := j.ScanIndex("", 100000)
	if err != nil {
		e.t.Fatal(err)
	}
	var got []string
	for _, en := range entries {
		got = append(got, fmt.Sprintf("%s %s %s", en.Key, en.UID, en.ResourceVersion))
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		e.t.Errorf("index =\n%s\nwant (server list)\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

func equal(t *testing.T, what string, got, want []string) {
	t.Helper()
	if strings.Join(got, "|") != strings.Join(want, "|") {
		t.Errorf("%s = %q; want %q", what, got, want)
	}
}

func sortStrings(s []string) { sort.Strings(s) }

var metaListOne = metav1.ListOptions{Limit: 1}

func hasPrefix(s, p string) bool { return strings.HasPrefix(s, p) }

// readAll reads the journal from offset from to its head, page by page (a
// Read stops after about 4 MiB).
func readAll(j *journal.Journal, from uint64) ([]journal.Event, error) {
	var out []journal.Event
	for {
		evs, err := j.Read(from, 10000)
		if err != nil || len(evs) == 0 {
			return out, err
		}
		out = append(out, evs...)
		from = evs[len(evs)-1].Offset + 1
	}
}
