package main

import (
	"fmt"
	"strings"
	"testing"
)

// restartResultsFixture is a made-up run at three N of watchjournal, the
// informer, the bare list and the metadata informer, with the relists with
// 1% changed and the restarts.
func restartResultsFixture() *results {
	ns := []int{20_000, 200_000, 1_000_000}
	var rows []row
	for _, n := range ns {
		f := float64(n) / 20_000
		wj := row{N: n, Subject: subjWatchjournal}
		wj.Synced.SyncSeconds = 0.9 * f
		wj.Synced.Steady = memory{HeapInuse: 3 << 20, RSS: 30 << 20}
		wj.Relists = []report{{RelistSeconds: 0.5 * f, Note: "journal: no event, as nothing changed"}}
		wj.Relisted = aggregate(wj.Relists)
		wj.Changed = n / 100
		wj.ChangedRelist = &report{RelistSeconds: 0.5 * f, Note: "journal: exactly the 200 changed keys, one event each"}
		wj.RestartSame = &restartResult{Seconds: 0.05 * f, restartReport: restartReport{Bytes: 1000, Check: "none"}}
		wj.RestartChanged = &restartResult{Seconds: 0.4 * f, restartReport: restartReport{Bytes: 100_000, KeysExpected: n / 100, Check: "exact"}}
		inf := row{N: n, Subject: subjInformer}
		inf.Synced.SyncSeconds = f
		inf.ChangedRelist = &report{RelistSeconds: f}
		inf.RestartSame = &restartResult{Seconds: f, restartReport: restartReport{Bytes: int64(n) * 1100}}
		inf.RestartChanged = &restartResult{Seconds: f, restartReport: restartReport{Bytes: int64(n) * 1100}}
		list := row{N: n, Subject: subjList}
		list.ChangedRelist = &report{RelistSeconds: f}
		md := row{N: n, Subject: subjMetadata}
		md.Synced.Steady.RSS = 100 << 20
		rows = append(rows, wj, inf, list, md)
	}
	return &results{o: options{ns: ns}, rows: rows}
}

// TestRestartTargets checks the restart target rows on made-up rows: one per
// N for each ratio, the 200k RSS row and the 1,000,000-object row, with the
// right verdicts.
func TestRestartTargets(t *testing.T) {
	got := verdicts(restartResultsFixture().restartTargets())
	want := map[string]string{
		"initial sync ≤ 1.0× the informer's sync (N=20000)":                                                                              "holds 0.90 / 1.00 s = 0.90×",
		"relist after a 410 with 2000 objects (1%) changed ≤ 0.7× the bare paginated full list (N=200000)":                               "holds 5.00 / 10.00 s = 0.50×",
		"restart with nothing changed: time to synced ≤ 0.1× the informer's (N=1000000)":                                                 "holds 2.50 / 50.00 s = 0.05×",
		"restart with nothing changed: bytes received ≤ 1% of the informer's (N=20000)":                                                  "holds 1 / 21484 KiB = 0.00%",
		"restart with 10000 objects (1%) changed, stored resourceVersion still served: time to synced ≤ 0.3× the informer's (N=1000000)": "MISSED 20.00 / 50.00 s = 0.40×",
		"RSS at N=200000 under the metadata informer's":                                                                                  "holds watchjournal 30.0 / 100.0 MiB (anon – MiB)",
		"at 1,000,000 objects: sync and relist complete, steady heap within 1.25× of the heap at N=20000":                                "holds synced in 45.0 s, relisted in 25.0 s (median of 1); heap 3.0 / 3.0 MiB = 1.00×",
	}
	if n := 20_000; !strings.HasPrefix(got[fmt.Sprintf("relists: the journal gained one event per changed key, none when nothing changed (N=%d)", n)], "holds") {
		t.Errorf("relist check at N=%d: %v", n, got)
	}
	for name, w := range want {
		if g, ok := got[name]; !ok || g != w {
			t.Errorf("%s:\n got %q\nwant %q", name, g, w)
		}
	}
	if n := len(got); n != 3*9+2 {
		var names []string
		for k := range got {
			names = append(names, k)
		}
		t.Errorf("%d targets; want %d:\n%s", n, 3*9+2, strings.Join(names, "\n"))
	}
}
