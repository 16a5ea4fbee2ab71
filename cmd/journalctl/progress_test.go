package main

import (
	"bytes"
	"context"
	"fmt"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/watchjournal/watchjournal/internal/controlplane"
	"github.com/watchjournal/watchjournal/reconcile"
)

// Ensure watch logs a list's progress every progressEvery pages when
// stderr is not a terminal: a first list of 30 objects at --page-size 2
// (15 pages) with a line every 5 pages logs pages 5, 10 and 15 with their
// objects so far.
func TestWatch_ListProgress_LogLines(t *testing.T) {
	old := progressEvery
	progressEvery = 5
	t.Cleanup(func() { progressEvery = old })
	// Pages: streaming lists off, as a server with the WatchList gate off.
	cp := controlplane.StartT(t, controlplane.Options{ExtraAPIServerArgs: []string{"--feature-gates=WatchList=false"}})
	ctx := context.Background()
	kube := kubernetes.NewForConfigOrDie(cp.RESTConfig())
	ns := "progress"
	if _, err := kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	for i := range 30 {
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("cm%02d", i)}}
		if _, err := kube.CoreV1().ConfigMaps(ns).Create(ctx, cm, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	db := filepath.Join(tempDir(t), "cm.db")
	rctx, cancel := context.WithCancel(ctx)
	defer cancel()
	_, stderr, code := startCLI(rctx, "watch", "configmaps", "-n", ns, "--db", db, "--kubeconfig", cp.KubeconfigPath(), "--page-size", "2")
	stderr.waitFor(t, "list complete")
	cancel()
	if c := exitStatus(t, code); c != 0 {
		t.Errorf("exit %d after interrupt; want 0; stderr:\n%s", c, stderr)
	}
	var got []string
	for _, line := range strings.Split(stderr.String(), "\n") {
		if strings.Contains(line, "\tlisting\t") {
			m := regexp.MustCompile(`"pages": (\d+), "objects": (\d+)`).FindStringSubmatch(line)
			if m == nil {
				t.Errorf("progress line without pages and objects: %s", line)
				continue
			}
			got = append(got, m[1]+"/"+m[2])
			if !strings.Contains(line, `"rate"`) || !strings.Contains(line, `"elapsed"`) {
				t.Errorf("progress line without rate or elapsed: %s", line)
			}
		}
	}
	if want := []string{"5/10", "10/20", "15/30"}; strings.Join(got, " ") != strings.Join(want, " ") {
		t.Errorf("progress lines (pages/objects) = %v; want %v; stderr:\n%s", got, want, stderr)
	}
}

// Ensure the terminal display waits a second into a list, then rewrites
// one line with pages, objects, rate and elapsed, at most every
// progressRedraw, which a log line clears and draws again below itself,
// and ends the line when the list ends.
func TestListProgress_Terminal(t *testing.T) {
	var out bytes.Buffer
	status := &statusLine{w: &out}
	p := &listProgress{status: status, log: zap.NewNop(), every: progressEvery}
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
// waits (not a terminal: a line every progressEvery pages), then the
// differences found.
func TestRelist_Progress(t *testing.T) {
	oldEvery, oldPoll := progressEvery, relistPoll
	progressEvery, relistPoll = 5, 10*time.Millisecond
	t.Cleanup(func() { progressEvery, relistPoll = oldEvery, oldPoll })
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
	stdout, stderr, code := startCLI(context.Background(), "relist", "--db", j.Path())
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
