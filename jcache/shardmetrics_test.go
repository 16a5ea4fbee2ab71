package jcache_test

// The metrics of a ranged file (a resource of ShardOptions.Owners) follow
// the loop that writes it: a range change stops the file's loop and
// starts another (feedrange.go), and a scrape after it reports the new
// loop, not the stopped one.

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/watchjournal/watchjournal/jcache"
	"github.com/watchjournal/watchjournal/metrics"
)

// Ensure a scrape of a ranged file after its range changed reports the
// loop that writes the file now: it is Watching, and counts the updates
// made since.
func TestShard_MetricsFollowTheOwnersFilesLoop(t *testing.T) {
	cp, kube, ns := setup(t)
	cfg := func() *jcache.ShardOptions {
		return &jcache.ShardOptions{
			Group: "metrics", Namespace: ns,
			Resources:     []schema.GroupResource{{Resource: "configmaps"}},
			Owners:        []schema.GroupResource{{Resource: "configmaps"}},
			LeaseDuration: 3 * time.Second, RenewInterval: 500 * time.Millisecond,
		}
	}
	const owners = 40
	createCMs(t, kube, ns, owners, func(i int) string { return fmt.Sprintf("owner-%03d", i) }, func(int) string { return "v" })
	r0 := startShardReplica(t, cp.RESTConfig(), cfg, "r0")
	defer r0.cancel()
	waitShard(t, "r0 alone holds the whole range", func() bool { return settled([]*shardReplica{r0}) },
		func() string { return describeShards([]*shardReplica{r0}) })
	reg := prometheus.NewRegistry()
	if err := jcache.RegisterMetrics(reg, r0.cache); err != nil {
		t.Fatal(err)
	}
	var last string
	scrape := func() (phase string, modified float64) {
		mfs, err := reg.Gather()
		if err != nil {
			t.Fatalf("Gather: %v", err)
		}
		for _, mf := range mfs {
			for _, m := range mf.GetMetric() {
				if !strings.HasPrefix(label(m, metrics.ResourceLabel), "configmaps") {
					continue
				}
				switch mf.GetName() {
				case "watchjournal_phase":
					if m.GetGauge().GetValue() == 1 {
						phase = label(m, "phase")
					}
				case "watchjournal_events_total":
					if label(m, "type") == "MODIFIED" {
						modified += m.GetCounter().GetValue()
					}
				}
			}
		}
		last = fmt.Sprintf("configmaps file: phase %q, MODIFIED %v", phase, modified)
		return phase, modified
	}
	waitShard(t, "the first scrape sees r0's loop watching", func() bool { p, _ := scrape(); return p == "Watching" },
		func() string { return last })

	// r1 joins: r0's range shrinks, so its file's loop is replaced.
	r1 := startShardReplica(t, cp.RESTConfig(), cfg, "r1")
	defer r1.cancel()
	rs := []*shardReplica{r0, r1}
	waitShard(t, "r0 and r1 settle", func() bool { return settled(rs) }, func() string { return describeShards(rs) })

	// Updates of owners r0 holds reach its new loop, and its metrics.
	l, err := kube.CoreV1().ConfigMaps(ns).List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	updated := 0
	for i := range l.Items {
		cm := &l.Items[i]
		if !strings.HasPrefix(cm.Name, "owner-") || !r0.cache.Holds(cm) {
			continue
		}
		cm.Data = map[string]string{"v": "updated"}
		if _, err := kube.CoreV1().ConfigMaps(ns).Update(context.Background(), cm, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
		updated++
	}
	if updated == 0 || updated == owners {
		t.Fatalf("r0 holds %d of %d owners; want some, not all", updated, owners)
	}
	waitShard(t, fmt.Sprintf("a scrape of r0 reports its new loop watching, with the %d updates", updated), func() bool {
		p, n := scrape()
		return p == "Watching" && n >= float64(updated)
	}, func() string { return last + describeShards(rs) })
}
