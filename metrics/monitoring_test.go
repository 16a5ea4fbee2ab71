package metrics_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr/testr"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/yaml"

	"github.com/watchjournal/watchjournal/internal/testing/controlplane"
	"github.com/watchjournal/watchjournal/journal"
	"github.com/watchjournal/watchjournal/metrics"
	"github.com/watchjournal/watchjournal/reconcile"
)

// monitoring is the folder of the alert rules and the dashboard.
const monitoring = "../deploy/monitoring"

var metricName = regexp.MustCompile(`\bwatchjournal_[a-z_]+\b`)

// exported gathers a registry with one journal and its running loop
// (synced, so that every metric has its series) and returns the names a
// query can use: each family's name, and a histogram's _bucket, _sum and
// _count series.
func exported(t *testing.T) map[string]bool {
	t.Helper()
	cp := controlplane.StartT(t, controlplane.Options{})
	res := journal.Resource{GVR: schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}, Namespace: "default"}
	j, err := journal.Open(filepath.Join(t.TempDir(), "cm.db"), &journal.Options{Resource: &res, NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	defer j.Close()
	if err := j.Consumers().Create("controller", 0); err != nil {
		t.Fatal(err)
	}
	loop, err := reconcile.New(cp.RESTConfig(), j, reconcile.Options{Logger: testr.New(t)})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	done := make(chan error, 1)
	go func() { done <- loop.Run(ctx) }()
	defer func() { cancel(); <-done }()
	if err := loop.WaitForSync(ctx); err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewPedanticRegistry()
	if err := metrics.Register(reg, j, loop); err != nil {
		t.Fatal(err)
	}
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	names := map[string]bool{}
	for _, mf := range mfs {
		names[mf.GetName()] = true
		if mf.GetType() == dto.MetricType_HISTOGRAM {
			for _, s := range []string{"_bucket", "_sum", "_count"} {
				names[mf.GetName()+s] = true
			}
		}
		for _, m := range mf.GetMetric() {
			if !hasLabel(m, metrics.ResourceLabel) {
				t.Errorf("%s: a series without the %s label", mf.GetName(), metrics.ResourceLabel)
			}
		}
	}
	return names
}

func hasLabel(m *dto.Metric, name string) bool {
	for _, l := range m.GetLabel() {
		if l.GetName() == name {
			return true
		}
	}
	return false
}

// ruleFile is the part of a Prometheus rules file the test reads.
type ruleFile struct {
	Groups []struct {
		Name  string `json:"name"`
		Rules []struct {
			Alert  string `json:"alert"`
			Record string `json:"record"`
			Expr   string `json:"expr"`
		} `json:"rules"`
	} `json:"groups"`
}

// dashboard is the part of a Grafana dashboard the test reads.
type dashboard struct {
	Title  string `json:"title"`
	UID    string `json:"uid"`
	Panels []struct {
		Title   string `json:"title"`
		Type    string `json:"type"`
		Targets []struct {
			Expr string `json:"expr"`
		} `json:"targets"`
	} `json:"panels"`
}

// Ensure every watchjournal_* name in the alert rules and the dashboard of
// deploy/monitoring is one package metrics exports (with a journal and its
// loop registered), that the rules cover lag, relists by cause, 410s,
// backoffs and sync, and that the dashboard is well-formed JSON whose
// panels query those metrics. tools/rulecheck (make test: promtool's rule checks) checks the
// rules' syntax.
func TestMonitoring_NamesExported(t *testing.T) {
	names := exported(t)
	used := map[string][]string{} // name -> where
	covers := func(where, expr string) {
		if strings.TrimSpace(expr) == "" {
			t.Errorf("%s: empty expression", where)
		}
		for _, n := range metricName.FindAllString(expr, -1) {
			used[n] = append(used[n], where)
		}
	}

	b, err := os.ReadFile(filepath.Join(monitoring, "watchjournal-rules.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var rf ruleFile
	if err := yaml.Unmarshal(b, &rf); err != nil {
		t.Fatalf("rules: %v", err)
	}
	alerts := 0
	var rulesExprs []string
	for _, g := range rf.Groups {
		for _, r := range g.Rules {
			alerts++
			covers("rule "+r.Alert+r.Record, r.Expr)
			rulesExprs = append(rulesExprs, r.Expr)
		}
	}
	if alerts == 0 {
		t.Fatal("rules: no rules read")
	}
	all := strings.Join(rulesExprs, "\n")
	for _, want := range []string{"watchjournal_consumer_lag_events", "watchjournal_lists_total", "watchjournal_gone_total",
		"watchjournal_backoffs_total", "watchjournal_synced"} {
		if !strings.Contains(all, want) {
			t.Errorf("rules: no rule on %s", want)
		}
	}

	b, err = os.ReadFile(filepath.Join(monitoring, "watchjournal-dashboard.json"))
	if err != nil {
		t.Fatal(err)
	}
	var d dashboard
	dec := json.NewDecoder(strings.NewReader(string(b)))
	if err := dec.Decode(&d); err != nil {
		t.Fatalf("dashboard: not well-formed JSON: %v", err)
	}
	if d.Title == "" || d.UID == "" || len(d.Panels) == 0 {
		t.Fatalf("dashboard: title %q, uid %q, %d panels; want all set", d.Title, d.UID, len(d.Panels))
	}
	var dashExprs []string
	for _, p := range d.Panels {
		if len(p.Targets) == 0 {
			t.Errorf("dashboard panel %q: no targets", p.Title)
		}
		for _, tg := range p.Targets {
			if !metricName.MatchString(tg.Expr) {
				t.Errorf("dashboard panel %q: expression %q queries no watchjournal_* metric", p.Title, tg.Expr)
			}
			covers("panel "+p.Title, tg.Expr)
			dashExprs = append(dashExprs, tg.Expr)
		}
	}
	all = strings.Join(dashExprs, "\n")
	for _, want := range []string{"watchjournal_consumer_lag_events", "watchjournal_lists_total", "watchjournal_gone_total",
		"watchjournal_backoffs_total", "watchjournal_synced"} {
		if !strings.Contains(all, want) {
			t.Errorf("dashboard: no panel on %s", want)
		}
	}

	var unknown []string
	for n, where := range used {
		if !names[n] {
			unknown = append(unknown, n+" (in "+strings.Join(where, ", ")+")")
		}
	}
	sort.Strings(unknown)
	for _, u := range unknown {
		t.Errorf("not exported by package metrics: %s", u)
	}
}
