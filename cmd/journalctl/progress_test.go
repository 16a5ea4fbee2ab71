package main

import (
	"bytes"
	"context"
	"fmt"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap"

	"github.com/watchjournal/watchjournal/internal/testing/controlplane"
	"github.com/watchjournal/watchjournal/reconcile"
)

// Ensure watch logs a list's progress every settings.progressEvery pages when
// stderr is not a terminal: a first list of 30 objects at --page-size 2
// (15 pages) with a line every 5 pages logs lines with pages and objects
// so far, a rate and the time elapsed, at least 5 pages apart, and ends
// with the list's whole count, 15 pages and 30 objects. The lines sample
// the loop's status (progress.go), so under load one may say 11 pages
// rather than 10 (TestListProgress_LogLines has the exact rule); the test
// waits for the final line, which is always logged, before it stops watch.
func TestWatch_ListProgress_LogLines(t *testing.T) {
	// Pages: streaming lists off, as a server with the WatchList gate off.
	ns := "progress"
	cp := controlplane.StartT(t, controlplane.Options{ExtraAPIServerArgs: []string{"--feature-gates=WatchList=false"}})
	kube := cp.CreateNamespaceT(t, ns)
	for i := range 30 {
		createConfigMaps(t, kube, ns, fmt.Sprintf("cm%02d", i))
	}
	db := filepath.Join(tempDir(t), "cm.db")
	rctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	_, stderr, code := startCLIWith(rctx, tuned(func(c *settings) { c.progressEvery = 5 }), "watch", "configmaps", "-n", ns, "--db", db, "--kubeconfig", cp.KubeconfigPath(), "--page-size", "2")
	stderr.waitForWithin(t, "list complete", time.Minute)
	stderr.waitForWithin(t, `"pages": 15, "objects": 30`, time.Minute)
	stopCLI(t, cancel, code, stderr)
	var pages []int
	for _, line := range strings.Split(stderr.String(), "\n") {
		if !strings.Contains(line, "\tlisting\t") {
			continue
		}
		m := regexp.MustCompile(`"pages": (\d+), "objects": (\d+)`).FindStringSubmatch(line)
		if m == nil {
			t.Errorf("progress line without pages and objects: %s", line)
			continue
		}
		p, _ := strconv.Atoi(m[1])
		if o, _ := strconv.Atoi(m[2]); o != 2*p {
			t.Errorf("progress line with %d objects in %d pages of 2: %s", o, p, line)
		}
		if !strings.Contains(line, `"rate"`) || !strings.Contains(line, `"elapsed"`) {
			t.Errorf("progress line without rate or elapsed: %s", line)
		}
		pages = append(pages, p)
	}
	t.Logf("progress lines at pages %v", pages)
	// Lines at least 5 pages apart from page 5 on; the last, the final
	// count, only past the one before.
	ok := len(pages) > 0 && pages[0] >= 5 && pages[len(pages)-1] == 15
	for i := 1; ok && i < len(pages); i++ {
		gap := 5
		if i == len(pages)-1 {
			gap = 1
		}
		ok = pages[i] >= pages[i-1]+gap
	}
	if !ok {
		t.Errorf("progress lines at pages %v; want lines at least 5 pages apart from page 5 on, the last at 15, the whole list; stderr:\n%s", pages, stderr)
	}
}

// Ensure the log lines' rule, on sampled statuses: a line once a list is
// listProgress.every pages past the last one (at the page sampled, 11 when
// 10 was not seen), none for a short list, and, when a list of that many
// pages or more ends past its last line, one with its final count, even
// when no sample saw it listing: the sample that first sees the list over
// carries it (reconcile.Status keeps the last list's counts, Lists says
// one completed), and without that line the last pages would never be
// shown (TestWatch_ListProgress_LogLines lost its "15 pages" so).
func TestListProgress_LogLines(t *testing.T) {
	lists := 0 // lists completed, across the cases: it only grows
	listing := func(pages int) reconcile.Status {
		st := reconcile.Status{Phase: reconcile.PhaseListing}
		st.ListPages, st.ListObjects, st.Lists = pages, 2*pages, lists
		return st
	}
	ended := func(pages int) reconcile.Status {
		lists++
		st := listing(pages)
		st.Phase = reconcile.PhaseWatching
		return st
	}
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		name    string
		samples []reconcile.Status
		want    []int // pages of the lines
	}{
		{"every sample seen, the last line at the last page", []reconcile.Status{listing(0), listing(4), listing(5), listing(9), listing(10), listing(15), ended(15)}, []int{5, 10, 15}},
		{"the list's last page sampled only once it ended", []reconcile.Status{listing(0), listing(5), listing(10), listing(14), ended(15)}, []int{5, 10, 15}},
		{"a late sample", []reconcile.Status{listing(1), listing(4), listing(11), ended(15)}, []int{11, 15}},
		{"only the list's end sampled", []reconcile.Status{listing(4), ended(15)}, []int{15}},
		{"the whole list between two samples", []reconcile.Status{{Phase: reconcile.PhaseConnecting}, ended(15)}, []int{15}},
		{"a short list logs nothing", []reconcile.Status{listing(0), listing(3), ended(4)}, nil},
		{"a short list between two samples logs nothing", []reconcile.Status{{Phase: reconcile.PhaseConnecting}, ended(4)}, nil},
		{"a list started again counts from its start", []reconcile.Status{listing(6), listing(2), listing(7), ended(7)}, []int{6, 7}},
		{"two lists", []reconcile.Status{listing(5), ended(6), listing(1), listing(5), ended(5)}, []int{5, 6, 5}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var out bytes.Buffer
			p := &listProgress{w: &out, every: 5}
			for i, st := range tc.samples {
				p.update(st, t0.Add(time.Duration(i)*time.Second))
			}
			var got []int
			for _, line := range strings.Split(strings.TrimSuffix(out.String(), "\n"), "\n") {
				var pages, objects int
				if _, err := fmt.Sscanf(line, "journalctl: relist: listing: %d pages, %d objects", &pages, &objects); err == nil {
					got = append(got, pages)
				}
			}
			if fmt.Sprint(got) != fmt.Sprint(tc.want) {
				t.Errorf("lines at pages %v; want %v; output:\n%s", got, tc.want, out.String())
			}
		})
	}
}

// Ensure the terminal display waits a second into a list, then rewrites
// one line with pages, objects, rate and elapsed, at most every
// progressRedraw, which a log line clears and draws again below itself,
// and ends the line when the list ends.
func TestListProgress_Terminal(t *testing.T) {
	var out bytes.Buffer
	status := &statusLine{w: &out}
	p := &listProgress{status: status, log: zap.NewNop(), every: defaultSettings().progressEvery}
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	listing := func(pages int) reconcile.Status {
		st := reconcile.Status{Phase: reconcile.PhaseListing}
		st.ListPages, st.ListObjects = pages, 5*pages
		return st
	}
	p.update(listing(0), t0)
	p.update(listing(1), t0.Add(500*time.Millisecond))
	if out.Len() != 0 {
		t.Fatalf("drawn before a second: %q", out.String())
	}
	p.update(listing(4), t0.Add(2*time.Second))
	p.update(listing(5), t0.Add(2*time.Second+50*time.Millisecond)) // within progressRedraw: not drawn
	fmt.Fprintf(status, "a log line\n")                             // above the status line
	p.update(reconcile.Status{Phase: reconcile.PhaseConnecting, Counters: listing(6).Counters}, t0.Add(3*time.Second))
	want := "\r\033[Klisting: 4 pages, 20 objects, 10 objects/s, 2s" +
		"\r\033[Ka log line\nlisting: 4 pages, 20 objects, 10 objects/s, 2s" +
		"\r\033[Klisting: 6 pages, 30 objects, 10 objects/s, 3s\n"
	if out.String() != want {
		t.Errorf("terminal output = %q; want %q", out.String(), want)
	}
}

// Ensure stats shows a running list's progress (phase Listing, pages and
// objects so far) through the socket.
func TestStats_ListProgress(t *testing.T) {
	path := writeJournal(t)
	st := reconcile.Status{Phase: reconcile.PhaseListing}
	st.ListPages, st.ListObjects = 3, 15
	serveLoop(t, openJournal(t, path), newFakeLoop(t, st, nil), maxWait)
	stdout, stderr, code := runCLI("stats", "--db", path)
	if code != 0 || !regexp.MustCompile(`phase\s+Listing\n`).MatchString(stdout) ||
		!regexp.MustCompile(`list progress\s+3 pages, 15 objects so far\n`).MatchString(stdout) {
		t.Errorf("stats: exit %d, stdout\n%s\nstderr %q; want phase Listing and 3 pages, 15 objects so far", code, stdout, stderr)
	}
	stdout, _, _ = runCLI("stats", "--db", path, "-o", "json")
	if !strings.Contains(stdout, `"listPages":3,"listObjects":15`) {
		t.Errorf("stats -o json = %s; want listPages 3, listObjects 15", stdout)
	}
}

// Ensure relist shows the progress of the watch's verify list while it
// waits (not a terminal: a line every settings.progressEvery pages), then the
// differences found.
func TestRelist_Progress(t *testing.T) {
	j := writerJournal(t)
	started := make(chan *output, 1)
	var loop *fakeLoop
	loop = newFakeLoop(t, watching, func() int {
		stderr := <-started
		for _, pages := range []int{5, 10} {
			loop.update(func(st *reconcile.Status) {
				st.Phase, st.ListPages, st.ListObjects = reconcile.PhaseListing, pages, 5*pages
			})
			want := fmt.Sprintf("listing: %d pages, %d objects", pages, 5*pages)
			deadline := time.Now().Add(10 * time.Second)
			for !strings.Contains(stderr.String(), want) && time.Now().Before(deadline) {
				time.Sleep(5 * time.Millisecond) // the CLI polls /status; nothing to wait on here
			}
		}
		loop.update(func(st *reconcile.Status) { st.Phase = reconcile.PhaseWatching })
		return 0
	})
	serveLoop(t, j, loop, maxWait)
	conf := tuned(func(c *settings) { c.progressEvery, c.relistPoll = 5, 10*time.Millisecond })
	stdout, stderr, code := startCLIWith(context.Background(), conf, "relist", "--db", j.Path())
	started <- stderr
	if c := exitStatus(t, code); c != 0 || stdout.String() != "relist: 0 divergences repaired\n" {
		t.Errorf("relist: exit %d, stdout %q, stderr %q; want 0 divergences", c, stdout, stderr)
	}
	for _, want := range []string{"journalctl: relist: listing: 5 pages, 25 objects", "journalctl: relist: listing: 10 pages, 50 objects"} {
		if !strings.Contains(stderr.String(), want) {
			t.Errorf("relist stderr:\n%s\nwant %q", stderr, want)
		}
	}
}
