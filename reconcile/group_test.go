package reconcile_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/watchjournal/watchjournal/journal"
	"github.com/watchjournal/watchjournal/reconcile"
)

// groupFaults answers requests for one resource (a path ending in
// /<resource>) with an error while set: every list with 503 (listDown),
// or the next watch with 410 Expired (goneWatch, once).
type groupFaults struct {
	mu        sync.Mutex
	listDown  string
	goneWatch string
}

func (f *groupFaults) wrap(rt http.RoundTripper) http.RoundTripper {
	return roundTripFunc(func(req *http.Request) (*http.Response, error) {
		watch := req.URL.Query().Get("watch") == "true"
		f.mu.Lock()
		code := 0
		switch {
		case !watch && f.listDown != "" && strings.HasSuffix(req.URL.Path, "/"+f.listDown):
			code = http.StatusServiceUnavailable
		case watch && f.goneWatch != "" && strings.HasSuffix(req.URL.Path, "/"+f.goneWatch):
			code, f.goneWatch = http.StatusGone, ""
		}
		f.mu.Unlock()
		if code == 0 {
			return rt.RoundTrip(req)
		}
		reason := map[int]string{410: "Expired", 503: "ServiceUnavailable"}[code]
		body := fmt.Sprintf(`{"kind":"Status","apiVersion":"v1","status":"Failure","message":"injected","reason":%q,"code":%d}`, reason, code)
		return &http.Response{StatusCode: code, Status: http.StatusText(code), Request: req, ProtoMajor: 1, ProtoMinor: 1,
			Header: http.Header{"Content-Type": {"application/json"}}, Body: io.NopCloser(strings.NewReader(body))}, nil
	})
}

func (f *groupFaults) set(fn func(*groupFaults)) { f.mu.Lock(); fn(f); f.mu.Unlock() }

// Two resources in one Group: each file is named after its resource and
// gets that resource's changes only; WaitForSync waits for both; a 410 on
// one relists that one alone.
func TestGroup_TwoResources(t *testing.T) {
	e := newEnv(t)
	dir := t.TempDir()
	resources := []journal.Resource{
		{GVR: schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}, Namespace: e.ns},
		{GVR: schema.GroupVersionResource{Version: "v1", Resource: "secrets"}, Namespace: e.ns, MetadataOnly: true},
	}
	f := &groupFaults{listDown: "secrets"}
	cfg := e.wrapped(f.wrap)
	g, err := reconcile.OpenGroup(cfg, dir, resources, reconcile.GroupOptions{Loop: pagedOptions(t), Journal: journal.Options{NoSync: true}})
	if err != nil {
		t.Fatalf("OpenGroup: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- g.Run(ctx) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run = %v; want nil after cancel", err)
		}
		if err := g.Close(); err != nil {
			t.Errorf("Close = %v", err)
		}
	}()
	m := g.Files()
	cms, secrets := m[0], m[1]
	for i, want := range []string{"configmaps.v1.db", "secrets.v1.db"} {
		if m[i].Path != filepath.Join(dir, want) {
			t.Errorf("file %d path = %s; want %s", i, m[i].Path, filepath.Join(dir, want))
		}
		if _, err := os.Stat(filepath.Join(dir, want)); err != nil {
			t.Errorf("file %s: %v", want, err)
		}
	}
	wait := func(what string, l *reconcile.Loop, cond func(reconcile.Status) bool) reconcile.Status {
		t.Helper()
		wctx, wcancel := context.WithTimeout(ctx, 60*time.Second)
		defer wcancel()
		if err := l.WaitFor(wctx, cond); err != nil {
			t.Fatalf("waiting for %s: %v; group status %+v", what, err, g.Status())
		}
		return l.Status()
	}

	// Secrets' lists fail: configmaps syncs, the group does not.
	wait("configmaps synced", cms.Loop, func(s reconcile.Status) bool { return s.Synced })
	wait("secrets' list failing", secrets.Loop, func(s reconcile.Status) bool { return errors.Is(s.LastError, reconcile.ErrList) })
	if g.HasSynced() {
		t.Fatalf("HasSynced = true while secrets' list fails; status %+v", g.Status())
	}
	expired, ecancel := context.WithCancel(ctx)
	ecancel()
	if err := g.WaitForSync(expired); !errors.Is(err, context.Canceled) {
		t.Fatalf("WaitForSync(cancelled) while secrets' list fails = %v; want context.Canceled", err)
	}
	f.set(func(f *groupFaults) { f.listDown = "" })
	sctx, scancel := context.WithTimeout(ctx, 60*time.Second)
	defer scancel()
	if err := g.WaitForSync(sctx); err != nil || !g.HasSynced() {
		t.Fatalf("WaitForSync = %v, HasSynced %v; want both synced; status %+v", err, g.HasSynced(), g.Status())
	}
	for _, ms := range g.Status() {
		if !ms.Synced || ms.Resource.Kind == "" {
			t.Errorf("status of %s: Synced %v, kind %q; want synced, kind recorded", ms.Resource, ms.Synced, ms.Resource.Kind)
		}
	}

	// Changes to each land in its own file.
	cmHead, _ := cms.Journal.Head()
	secHead, _ := secrets.Journal.Head()
	e.create("a")
	if _, err := e.kube.CoreV1().Secrets(e.ns).Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "s"},
		StringData: map[string]string{"k": "v"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	keys := func(mb reconcile.GroupFile, from uint64) []string {
		t.Helper()
		wctx, wcancel := context.WithTimeout(ctx, 60*time.Second)
		defer wcancel()
		if err := mb.Journal.Wait(wctx, from-1); err != nil {
			t.Fatalf("waiting for an event in %s: %v; status %+v", mb.Path, err, g.Status())
		}
		evs, err := readAll(mb.Journal, from)
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, ev := range evs {
			out = append(out, fmt.Sprintf("%s %s", ev.Type, strings.TrimPrefix(ev.Key, e.ns+"/")))
		}
		return out
	}
	equal(t, "configmaps.v1.db events", keys(cms, cmHead+1), []string{"ADDED a"})
	equal(t, "secrets.v1.db events", keys(secrets, secHead+1), []string{"ADDED s"})

	// A 410 on configmaps' next watch: configmaps relists, secrets resumes
	// its watch and does not.
	before := g.Status()
	f.set(func(f *groupFaults) { f.goneWatch = "configmaps" })
	e.proxy.Cut()
	e.proxy.Heal()
	cmSt := wait("configmaps relisted", cms.Loop, func(s reconcile.Status) bool {
		return s.Gone > before[0].Gone && s.Lists > before[0].Lists && s.Phase == reconcile.PhaseWatching
	})
	secSt := wait("secrets watching again", secrets.Loop, func(s reconcile.Status) bool {
		return s.Watches > before[1].Watches && s.Phase == reconcile.PhaseWatching
	})
	if secSt.Lists != before[1].Lists || secSt.Gone != before[1].Gone {
		t.Errorf("secrets after configmaps' 410: Lists %d, Gone %d; want %d, %d (no relist)", secSt.Lists, secSt.Gone, before[1].Lists, before[1].Gone)
	}
	if cmSt.Lists != before[0].Lists+1 {
		t.Errorf("configmaps after its 410: Lists %d; want %d", cmSt.Lists, before[0].Lists+1)
	}
	e.checkIndex(cms.Journal)
}

// OpenGroup with a resource discovery does not serve fails with
// ErrUnknownResource, and leaves no file behind: neither the unknown
// resource's nor the one it created before it.
func TestOpenGroup_UnknownResource_NoFileLeft(t *testing.T) {
	e := newEnv(t)
	dir := t.TempDir()
	_, err := reconcile.OpenGroup(e.cp.RESTConfig(), dir, []journal.Resource{
		{GVR: schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}, Namespace: e.ns},
		{GVR: schema.GroupVersionResource{Version: "v1", Resource: "secretz"}, Namespace: e.ns, MetadataOnly: true},
	}, reconcile.GroupOptions{Loop: testOptions(t), Journal: journal.Options{NoSync: true}})
	if !errors.Is(err, reconcile.ErrUnknownResource) || !strings.Contains(err.Error(), `did you mean "secrets"?`) {
		t.Fatalf("OpenGroup = %v; want ErrUnknownResource suggesting secrets", err)
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 0 {
		t.Errorf("files left in %s: %v; want none", dir, ents)
	}
}
