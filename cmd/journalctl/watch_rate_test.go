package main

import (
	"context"
	"fmt"
	"net/http"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes"

	"github.com/watchjournal/watchjournal/internal/clientrate"
	"github.com/watchjournal/watchjournal/internal/testing/controlplane"
	"github.com/watchjournal/watchjournal/journal"
	"github.com/watchjournal/watchjournal/reconcile"
)

// Ensure that watch's --qps and --burst default to clientrate's (client-side
// limiting off), that the flags set them, and that the client built from
// the default config has no client-side rate limiter at all.
func TestWatch_ClientConfig_Rate(t *testing.T) {
	conf := defaultSettings()
	fl := newWatchCmd(&conf).Flags()
	if q, b := fl.Lookup("qps").DefValue, fl.Lookup("burst").DefValue; q != "-1" || b != "300" {
		t.Errorf("watch --qps, --burst defaults = %s, %s; want -1 (no client-side limit) and 300", q, b)
	}
	kubeconfig := writeKubeconfig(t, tempDir(t), "https://127.0.0.1:1")
	for _, tc := range []struct {
		qps   float32
		burst int
	}{{clientrate.QPS, clientrate.Burst}, {20, 40}} {
		cfg, _, err := clientConfig(watchFlags{kubeconfig: kubeconfig, qps: tc.qps, burst: tc.burst})
		if err != nil {
			t.Fatal(err)
		}
		if cfg.QPS != tc.qps || cfg.Burst != tc.burst || cfg.RateLimiter != nil {
			t.Errorf("config with --qps %v --burst %d: QPS %v, Burst %d, RateLimiter %v; want the flags' values and no RateLimiter",
				tc.qps, tc.burst, cfg.QPS, cfg.Burst, cfg.RateLimiter)
		}
		cs, err := kubernetes.NewForConfig(cfg)
		if err != nil {
			t.Fatal(err)
		}
		if limited := cs.CoreV1().RESTClient().GetRateLimiter() != nil; limited != (tc.qps > 0) {
			t.Errorf("client with --qps %v: has a client-side rate limiter = %v; want %v", tc.qps, limited, tc.qps > 0)
		}
	}
	if code := run(context.Background(), []string{"watch", "cm", "--db", "x.db", "--burst", "-1"}, new(strings.Builder), new(strings.Builder)); code != 1 {
		t.Errorf("watch --burst -1: exit %d; want 1", code)
	}
}

// listRequests records the times of the list requests (GETs of a
// collection that are not watches) that pass through it.
type listRequests struct {
	next  http.RoundTripper
	mu    sync.Mutex
	times []time.Time
}

func (l *listRequests) RoundTrip(r *http.Request) (*http.Response, error) {
	if r.Method == http.MethodGet && r.URL.Query().Get("watch") != "true" && strings.HasSuffix(r.URL.Path, "/configmaps") {
		l.mu.Lock()
		l.times = append(l.times, time.Now())
		l.mu.Unlock()
	}
	return l.next.RoundTrip(r)
}

// Ensure that a list at page size 5 with the CLI's client config is not
// throttled on the client, against the real kube-apiserver: client-go's
// default (5 requests/s after a burst of 10) would need at least
// (requests-10)/5 seconds for it; unthrottled it takes a fraction of that.
func TestWatch_ListAtPageSize5IsNotThrottledOnTheClient(t *testing.T) {
	const n, ns = 150, "rate"
	cp := controlplane.StartT(t, controlplane.Options{})
	admin := cp.CreateNamespaceT(t, ns)
	for i := range n {
		createConfigMaps(t, admin, ns, fmt.Sprintf("cm%03d", i))
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	cfg, _, err := clientConfig(watchFlags{kubeconfig: cp.KubeconfigPath(), qps: clientrate.QPS, burst: clientrate.Burst})
	if err != nil {
		t.Fatal(err)
	}
	lists := &listRequests{}
	cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper { lists.next = rt; return lists })
	res := journal.Resource{GVR: schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}, Namespace: ns}
	j, err := journal.Open(filepath.Join(t.TempDir(), "j.db"), &journal.Options{Resource: &res, NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	defer j.Close()
	loop, err := reconcile.New(cfg, j, reconcile.Options{PageSize: 5, ListMode: reconcile.ListModePaginated})
	if err != nil {
		t.Fatal(err)
	}
	runCtx, stop := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- loop.Run(runCtx) }()
	defer func() { stop(); <-done }()
	if err := loop.WaitFor(ctx, func(st reconcile.Status) bool { return st.Lists >= 1 }); err != nil {
		t.Fatalf("waiting for the list: %v (status %+v)", err, loop.Status())
	}

	lists.mu.Lock()
	times := append([]time.Time{}, lists.times...)
	lists.mu.Unlock()
	if len(times) < n/5 {
		t.Fatalf("%d list requests for %d objects at page size 5; want at least %d", len(times), n, n/5)
	}
	took := times[len(times)-1].Sub(times[0])
	throttled := time.Duration(len(times)-10) * time.Second / 5
	t.Logf("%d list requests in %v (%.0f/s); client-go's default limit needs at least %v", len(times), took,
		float64(len(times)-1)/took.Seconds(), throttled)
	if took >= throttled/2 {
		t.Errorf("%d list requests took %v; want less than half the %v a client-side limit of 5/s after a burst of 10 needs", len(times), took, throttled)
	}
	if st, _ := j.Stats(); st.Objects != n {
		t.Errorf("index holds %d objects after the list; want %d", st.Objects, n)
	}
}
