package main

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"
)

// scrape keeps unlabeled samples and those labelled with resource only
// (package metrics' journal series), under their bare names, and skips
// the rest.
func TestScrape(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		fmt.Fprint(w, `# HELP watchjournal_synced 1 once synced.
# TYPE watchjournal_synced gauge
watchjournal_synced{resource="configmaps.v1 -n bench"} 1
watchjournal_index_objects{resource="configmaps.v1 -n bench"} 300
watchjournal_backoffs_total{reason="Network",resource="configmaps.v1 -n bench"} 2
watchjournal_commit_seconds_bucket{resource="configmaps.v1 -n bench",le="0.001"} 4
go_memstats_heap_inuse_bytes 7.2e+06
`)
	}))
	defer srv.Close()
	m, err := scrape(context.Background(), srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]float64{"watchjournal_synced": 1, "watchjournal_index_objects": 300, "go_memstats_heap_inuse_bytes": 7.2e6}
	if len(m) != len(want) {
		t.Errorf("scrape = %v; want %v", m, want)
	}
	for k, v := range want {
		if m[k] != v {
			t.Errorf("scrape[%s] = %v; want %v", k, m[k], v)
		}
	}
}
