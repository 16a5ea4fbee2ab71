package metrics_test

import (
	"context"
	"errors"
	"fmt"
	"github.com/go-logr/logr/testr"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	dto "github.com/prometheus/client_model/go"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"

	"github.com/watchjournal/watchjournal/internal/testing/controlplane"
	"github.com/watchjournal/watchjournal/journal"
	"github.com/watchjournal/watchjournal/metrics"
	"github.com/watchjournal/watchjournal/reconcile"
)

// value returns the value of the sample of name whose labels include want
// (name=value pairs), and whether there is one.
func value(t *testing.T, reg prometheus.Gatherer, name string, want ...string) (float64, bool) {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatalf("Gather: %v", err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
	metric:
		for _, m := range mf.GetMetric() {
			labels := map[string]string{}
			for _, lp := range m.GetLabel() {
				labels[lp.GetName()] = lp.GetValue()
			}
			for i := 0; i+1 < len(want); i += 2 {
				if labels[want[i]] != want[i+1] {
					continue metric
				}
			}
			return sampleValue(m), true
		}
	}
	return 0, false
}

func sampleValue(m *dto.Metric) float64 {
	switch {
	case m.Counter != nil:
		return m.Counter.GetValue()
	case m.Gauge != nil:
		return m.Gauge.GetValue()
	case m.Histogram != nil:
		return float64(m.Histogram.GetSampleCount())
	}
	return 0
}

// Ensure a scrape after a 410 (etcd compacted while the watch was cut)
// shows the relist by cause gone, the 410, the relist's events, the
// commits, the journal's offsets and objects, a consumer's lag and the sync
// state; the collector registers on controller-runtime's registry too.
func TestCollector_AfterGone(t *testing.T) {
	cp := controlplane.StartT(t, controlplane.Options{})
	ctx := context.Background()
	kube := kubernetes.NewForConfigOrDie(cp.RESTConfig())
	ns := "metrics"
	if _, err := kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	cms := kube.CoreV1().ConfigMaps(ns)
	create := func(name string) {
		t.Helper()
		if _, err := cms.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	for i := range 5 {
		create(fmt.Sprintf("cm%d", i))
	}
	proxy, err := controlplane.NewProxy(cp.APIServerAddr())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(proxy.Close)

	res := journal.Resource{GVR: schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}, Namespace: ns}
	j, err := journal.Open(filepath.Join(t.TempDir(), "j.db"), &journal.Options{Resource: &res, NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	defer j.Close()
	if _, err := j.Consumers().Open("app"); err != nil {
		t.Fatal(err)
	}
	loop, err := reconcile.New(cp.ProxiedRESTConfig(proxy), j, reconcile.Options{
		PageSize: 2, MinBackoff: 20 * time.Millisecond, MaxBackoff: 300 * time.Millisecond, Logger: testr.New(t),
	})
	if err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewPedanticRegistry()
	if err := metrics.Register(reg, j, loop); err != nil {
		t.Fatalf("Register: %v", err)
	}
	runCtx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- loop.Run(runCtx) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run = %v", err)
		}
	}()
	wait := func(what string, cond func(reconcile.Status) bool) {
		t.Helper()
		wctx, wcancel := context.WithTimeout(ctx, 60*time.Second)
		defer wcancel()
		if err := loop.WaitFor(wctx, cond); err != nil {
			t.Fatalf("waiting for %s: %v; last status %+v", what, err, loop.Status())
		}
	}
	wait("initial list", func(s reconcile.Status) bool { return s.Lists >= 1 && s.Phase == reconcile.PhaseWatching })

	proxy.Cut()
	create("late1")
	create("late2")
	cctx, ccancel := context.WithTimeout(ctx, 30*time.Second)
	if _, err := cp.Compact(cctx); err != nil {
		t.Fatal(err)
	}
	ccancel()
	proxy.Heal()
	wait("relist after 410", func(s reconcile.Status) bool { return s.Lists >= 2 && s.Phase == reconcile.PhaseWatching })

	for _, c := range []struct {
		name   string
		labels []string
		min    float64
		max    float64
	}{
		{"watchjournal_lists_total", []string{"cause", "initial"}, 1, 1},
		{"watchjournal_lists_total", []string{"cause", "gone"}, 1, 1e9},
		{"watchjournal_gone_total", nil, 1, 1e9},
		{"watchjournal_events_total", []string{"type", "ADDED", "origin", "relist"}, 7, 7},
		{"watchjournal_list_pages_total", nil, 6, 1e9}, // 3 pages of 2 for 5 objects, 4 for 7
		{"watchjournal_list_objects_total", nil, 12, 1e9},
		{"watchjournal_list_bytes_total", nil, 1, 1e12},
		{"watchjournal_watches_total", nil, 2, 1e9},
		{"watchjournal_requests_total", nil, 2, 1e9}, // a streaming list goes on as the watch: one request each
		{"watchjournal_received_bytes_total", nil, 1, 1e12},
		{"watchjournal_synced", nil, 1, 1},
		{"watchjournal_synced_by", []string{"by", "list"}, 1, 1},
		{"watchjournal_replays_total", nil, 0, 0},
		{"watchjournal_phase", []string{"phase", "Watching"}, 1, 1},
		{"watchjournal_commit_duration_seconds", nil, 2, 1e9},
		{"watchjournal_journal_head_offset", nil, 7, 7},
		{"watchjournal_journal_first_offset", nil, 1, 1},
		{"watchjournal_index_objects", nil, 7, 7},
		{"watchjournal_consumer_lag_events", []string{"consumer", "app"}, 7, 7},
		{"watchjournal_file_size_bytes", nil, 1, 1e12},
		{"watchjournal_journal_size_bytes", nil, 1, 1e12},
	} {
		v, ok := value(t, reg, c.name, c.labels...)
		if !ok || v < c.min || v > c.max {
			t.Errorf("%s%v = %v (present %v); want in [%v, %v]", c.name, c.labels, v, ok, c.min, c.max)
		}
	}
	if v, ok := value(t, reg, "watchjournal_list_mode", "mode", "streaming"); !ok || v != 1 {
		t.Errorf("watchjournal_list_mode{mode=streaming} = %v (present %v); want 1", v, ok)
	}
	if v, ok := value(t, reg, "watchjournal_list_mode", "mode", "paginated"); !ok || v != 0 {
		t.Errorf("watchjournal_list_mode{mode=paginated} = %v (present %v); want 0", v, ok)
	}
	if n, err := testutil.GatherAndCount(reg, "watchjournal_backoffs_total"); err != nil || n != 6 {
		t.Errorf("watchjournal_backoffs_total series = %d, %v; want 6 (one per reason)", n, err)
	}
	probs, err := testutil.GatherAndLint(reg)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range probs {
		t.Errorf("lint: %s: %s", p.Metric, p.Text)
	}

	// controller-runtime's registry takes the same collector.
	if err := metrics.Register(ctrlmetrics.Registry, j, loop); err != nil {
		t.Fatalf("Register on controller-runtime's registry: %v", err)
	}
	if v, ok := value(t, ctrlmetrics.Registry.(prometheus.Gatherer), "watchjournal_synced"); !ok || v != 1 {
		t.Errorf("controller-runtime registry: watchjournal_synced = %v (present %v); want 1", v, ok)
	}
	if err := metrics.Register(ctrlmetrics.Registry, j, loop); !errors.As(err, new(prometheus.AlreadyRegisteredError)) {
		t.Errorf("second Register = %v; want an AlreadyRegisteredError", err)
	}
}

// Ensure two journals register on one registry through RegisterResource
// (no duplicate-registration error), each series labeled with its
// journal's resource, and the same resource twice is refused.
func TestRegisterResource_TwoJournals(t *testing.T) {
	reg := prometheus.NewPedanticRegistry()
	var js []*journal.Journal
	for _, name := range []string{"configmaps", "secrets"} {
		res := journal.Resource{GVR: schema.GroupVersionResource{Version: "v1", Resource: name}, Namespace: "wj"}
		j, err := journal.Open(filepath.Join(t.TempDir(), name+".db"), &journal.Options{Resource: &res, NoSync: true})
		if err != nil {
			t.Fatal(err)
		}
		defer j.Close()
		if err := metrics.RegisterResource(reg, j, nil); err != nil {
			t.Fatalf("RegisterResource(%s): %v", name, err)
		}
		js = append(js, j)
	}
	for _, r := range []string{"configmaps.v1 -n wj", "secrets.v1 -n wj"} {
		if v, ok := value(t, reg, "watchjournal_journal_head_offset", metrics.ResourceLabel, r); !ok || v != 0 {
			t.Errorf("watchjournal_journal_head_offset{resource=%q} = %v (present %v); want 0", r, v, ok)
		}
	}
	if n, err := testutil.GatherAndCount(reg, "watchjournal_index_objects"); err != nil || n != 2 {
		t.Errorf("watchjournal_index_objects series = %d, %v; want 2 (one per resource)", n, err)
	}
	if err := metrics.RegisterResource(reg, js[0], nil); !errors.As(err, new(prometheus.AlreadyRegisteredError)) {
		t.Errorf("RegisterResource of the same journal again = %v; want an AlreadyRegisteredError", err)
	}
}

// Ensure Register takes journals one after another on one registry, at
// different times, with scrapes in between (the second and third join a
// registry already gathered): every series is labeled with its journal's
// resource, a scrape after each join shows every journal registered so
// far, and the same resource twice is refused.
func TestRegister_JournalsJoinLater(t *testing.T) {
	reg := prometheus.NewPedanticRegistry()
	open := func(name string) *journal.Journal {
		res := journal.Resource{GVR: schema.GroupVersionResource{Version: "v1", Resource: name}, Namespace: "wj"}
		j, err := journal.Open(filepath.Join(t.TempDir(), name+".db"), &journal.Options{Resource: &res, NoSync: true})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = j.Close() })
		return j
	}
	var want []string
	for i, name := range []string{"configmaps", "secrets", "services"} {
		j := open(name)
		if err := metrics.Register(reg, j, nil); err != nil {
			t.Fatalf("Register of journal %d (%s): %v", i+1, name, err)
		}
		want = append(want, fmt.Sprintf("watchjournal_index_objects{resource=%q} 0", name+".v1 -n wj"))
		exp := "# HELP watchjournal_index_objects Objects in the journal's index (the resource's current state).\n" +
			"# TYPE watchjournal_index_objects gauge\n" + strings.Join(want, "\n") + "\n"
		if err := testutil.GatherAndCompare(reg, strings.NewReader(exp), "watchjournal_index_objects"); err != nil {
			t.Errorf("after registering %d journals: %v", i+1, err)
		}
		if n, err := testutil.GatherAndCount(reg, "watchjournal_scrape_errors_total"); err != nil || n != i+1 {
			t.Errorf("watchjournal_scrape_errors_total series after %d journals = %d, %v; want %d", i+1, n, err, i+1)
		}
		if i == 0 {
			if err := metrics.Register(reg, j, nil); !errors.As(err, new(prometheus.AlreadyRegisteredError)) {
				t.Errorf("Register of the same journal again = %v; want an AlreadyRegisteredError", err)
			}
		}
	}
	probs, err := testutil.GatherAndLint(reg)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range probs {
		t.Errorf("lint: %s: %s", p.Metric, p.Text)
	}
}

// Ensure a collector made with NewCollectorFunc reports the loop its
// function returns at each scrape: the journal alone while none writes
// it, then the loop writing it, then the one that replaced it (a shard
// member's file after a range change), not the stopped one.
func TestNewCollectorFunc_FollowsTheCurrentLoop(t *testing.T) {
	res := journal.Resource{GVR: schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}, Namespace: "wj"}
	j, err := journal.Open(filepath.Join(t.TempDir(), "j.db"), &journal.Options{Resource: &res, NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	defer j.Close()
	var mu sync.Mutex
	var cur *reconcile.Loop
	reg := prometheus.NewPedanticRegistry()
	if err := reg.Register(metrics.NewCollectorFunc(j, func() *reconcile.Loop { mu.Lock(); defer mu.Unlock(); return cur })); err != nil {
		t.Fatal(err)
	}
	phases := []reconcile.Phase{reconcile.PhaseStarting, reconcile.PhaseListing, reconcile.PhaseConnecting,
		reconcile.PhaseWatching, reconcile.PhaseBackoff, reconcile.PhaseStopped}
	// phase returns the phase the scrape reports, "" for none.
	phase := func() string {
		t.Helper()
		for _, p := range phases {
			if v, ok := value(t, reg, "watchjournal_phase", "phase", string(p)); ok && v == 1 {
				return string(p)
			}
		}
		return ""
	}
	if p := phase(); p != "" {
		t.Errorf("phase with no loop = %q; want no series", p)
	}
	if _, ok := value(t, reg, "watchjournal_index_objects"); !ok {
		t.Error("watchjournal_index_objects with no loop: missing; want the journal's metrics")
	}
	// Loops of an apiserver that is not there: they list, fail and back
	// off until their context ends.
	setLoop := func() *reconcile.Loop {
		l, err := reconcile.New(&rest.Config{Host: "http://127.0.0.1:1"}, j, reconcile.Options{})
		if err != nil {
			t.Fatal(err)
		}
		mu.Lock()
		cur = l
		mu.Unlock()
		return l
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_ = setLoop().Run(ctx) // returns at once: the loop is stopped
	if p := phase(); p != string(reconcile.PhaseStopped) {
		t.Errorf("phase of the stopped loop = %q; want %q", p, reconcile.PhaseStopped)
	}
	ctx, cancel = context.WithCancel(context.Background())
	done := make(chan error, 1)
	l := setLoop()
	go func() { done <- l.Run(ctx) }()
	defer func() { cancel(); <-done }()
	deadline := time.Now().Add(30 * time.Second)
	for p := phase(); p == "" || p == string(reconcile.PhaseStopped); p = phase() {
		if time.Now().After(deadline) {
			t.Fatalf("phase after the loop was replaced by a running one = %q; want the running loop's (%q)", p, l.Status().Phase)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
