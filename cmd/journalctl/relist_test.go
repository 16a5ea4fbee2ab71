package main

import (
	"context"
	"fmt"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/watchjournal/watchjournal/journal"
	"github.com/watchjournal/watchjournal/journal/inspect"
	"github.com/watchjournal/watchjournal/reconcile"
)

// repairing returns a fake verify for the test journal j (head 4): while
// it runs the watch journals wj/c (offset 5), then the relist journals the
// two objects the watch had lost, wj/d and wj/e (6 and 7).
func repairing(t *testing.T, j *journal.Journal) func() int {
	return func() int {
		watched := ev(journal.Added, "wj/c", "u3", "13", 4)
		lost := []journal.Event{ev(journal.Added, "wj/d", "u4", "14", 5), ev(journal.Added, "wj/e", "u5", "14", 5)}
		for i := range lost {
			lost[i].Origin = journal.OriginRelist
		}
		for _, evs := range [][]journal.Event{{watched}, lost} {
			err := j.Writer().Update(func(tx *journal.Tx) error {
				for i := range evs {
					if _, err := tx.Append(&evs[i]); err != nil {
						return err
					}
				}
				return tx.SetResourceVersion(evs[0].ResourceVersion)
			})
			if err != nil {
				t.Errorf("repair: %v", err)
				return 0
			}
		}
		return len(lost)
	}
}

func TestRelist_ThroughTheSocket(t *testing.T) {
	j := writerJournal(t)
	loop := newFakeLoop(t, watching, repairing(t, j))
	serveLoop(t, j, loop, maxWait)

	stdout, stderr, code := runCLI("relist", "--db", j.Path())
	const want = `relist: 2 divergences repaired
OFFSET  TIME                      TYPE   ORIGIN  KEY   UID  RESOURCEVERSION
6       2026-07-01T12:00:05.123Z  ADDED  relist  wj/d  u4   14
7       2026-07-01T12:00:05.123Z  ADDED  relist  wj/e  u5   14
`
	if code != 0 || stdout != want || stderr != "" {
		t.Errorf("relist: exit %d, stdout\n%s\nstderr %q; want 0 and\n%s", code, stdout, stderr, want)
	}
	if n := loop.verifyRequests(); n != 1 {
		t.Errorf("Verify called %d times; want 1", n)
	}

	// stats shows the counters the verify moved: verifies 1 to 2,
	// divergences 0 to 2, lists 2 to 3.
	stdout, _, code = runCLI("stats", "--db", j.Path())
	for _, row := range []string{"\nlists            3\n", "\nverifies         2\n", "\ndivergences      2\n", "\n410s             1\n", "\nidle restarts    3\n"} {
		if code != 0 || !strings.Contains(stdout, row) {
			t.Errorf("stats after relist: exit %d, stdout\n%s\nwant the row %q", code, stdout, strings.Trim(row, "\n"))
		}
	}

	// A second relist that finds nothing prints the count alone.
	loop.setRepair(func() int { return 0 })
	stdout, stderr, code = runCLI("relist", "--db", j.Path())
	if code != 0 || stdout != "relist: 0 divergences repaired\n" {
		t.Errorf("second relist: exit %d, stdout %q, stderr %q; want 0 divergences", code, stdout, stderr)
	}
}

func TestRelist_NoWatch(t *testing.T) {
	path := writeJournal(t)
	want := "journalctl: no watch is running on " + path + "\n"
	_, stderr, code := runCLI("relist", "--db", path)
	if code != 2 || stderr != want {
		t.Errorf("relist without a watch: exit %d, stderr %q; want 2 and %q", code, stderr, want)
	}
	// A killed watch leaves its socket behind: nobody answers on it.
	if err := os.WriteFile(inspect.SocketPath(path), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	_, stderr, code = runCLI("relist", "--db", path)
	if code != 2 || stderr != want {
		t.Errorf("relist with a stale socket: exit %d, stderr %q; want 2 and %q", code, stderr, want)
	}
}

// A loop that never completes the verify (an unreachable apiserver, say):
// relist gives up after settings.relistTimeout and names the loop's phase
// and last error.
func TestRelist_GivesUp(t *testing.T) {
	j := writerJournal(t)
	loop := newFakeLoop(t, watching, nil)
	serveLoop(t, j, loop, 10*time.Millisecond) // so the client polls more than once

	stdout, stderr, code := runCLIWith(tuned(func(c *settings) { c.relistTimeout = 50 * time.Millisecond }), "relist", "--db", j.Path())
	want := "journalctl: relist: no relist completed within 50ms (phase Watching, last error: reconcile: watch failed: boom)\n"
	if code != 1 || stdout != "" || stderr != want {
		t.Errorf("relist: exit %d, stdout %q, stderr %q; want 1 and %q", code, stdout, stderr, want)
	}
	if n := loop.verifyRequests(); n != 1 {
		t.Errorf("Verify called %d times; want 1", n)
	}
}

// Two relists of one process running at once, each with its own timeout
// (settings.relistTimeout), each give up after their own and say so.
func TestRelist_GivesUp_SettingsPerInvocation(t *testing.T) {
	type invocation struct {
		timeout        time.Duration
		db             string
		stdout, stderr string
		code           int
	}
	runs := []*invocation{{timeout: 50 * time.Millisecond}, {timeout: 120 * time.Millisecond}}
	for _, r := range runs {
		j := writerJournal(t)
		serveLoop(t, j, newFakeLoop(t, watching, nil), 10*time.Millisecond)
		r.db = j.Path()
	}
	var wg sync.WaitGroup
	for _, r := range runs { // both at once, once both watches serve
		conf := tuned(func(c *settings) { c.relistTimeout = r.timeout })
		wg.Go(func() { r.stdout, r.stderr, r.code = runCLIWith(conf, "relist", "--db", r.db) })
	}
	wg.Wait()
	for _, r := range runs {
		want := fmt.Sprintf("journalctl: relist: no relist completed within %v (phase Watching, last error: reconcile: watch failed: boom)\n", r.timeout)
		if r.code != 1 || r.stdout != "" || r.stderr != want {
			t.Errorf("relist with timeout %v: exit %d, stdout %q, stderr %q; want 1 and %q", r.timeout, r.code, r.stdout, r.stderr, want)
		}
	}
}

func TestRelist_WatchStopping(t *testing.T) {
	j := writerJournal(t)
	serveLoop(t, j, newFakeLoop(t, reconcile.Status{Phase: reconcile.PhaseStopped}, nil), maxWait)
	_, stderr, code := runCLI("relist", "--db", j.Path())
	if want := "journalctl: relist: the watch stopped before the relist completed\n"; code != 1 || stderr != want {
		t.Errorf("relist: exit %d, stderr %q; want 1 and %q", code, stderr, want)
	}
}

func TestRelist_Interrupted(t *testing.T) {
	j := writerJournal(t)
	loop := newFakeLoop(t, watching, nil)
	serveLoop(t, j, loop, maxWait)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	stdout, stderr, code := startCLI(ctx, "relist", "--db", j.Path())
	// The request comes before the wait: interrupt once it came.
	waitUntil(t, func() (bool, string) {
		n := loop.verifyRequests()
		return n == 1, fmt.Sprintf("%d verify requests; want 1", n)
	})
	cancel()
	want := "journalctl: relist: interrupted while waiting; the watch still relists\n"
	if c := exitStatus(t, code); c != 0 || stdout.String() != "" || stderr.String() != want {
		t.Errorf("relist interrupted: exit %d, stdout %q, stderr %q; want 0 and %q", c, stdout, stderr, want)
	}
}

// listAB is listA with object b added: the watch of the fake apiserver
// never tells of it, so only a relist finds it.
const listAB = `{"kind":"ConfigMapList","apiVersion":"v1","metadata":{"resourceVersion":"6"},"items":[
	{"metadata":{"name":"a","namespace":"wj","uid":"u1","resourceVersion":"3"},"data":{"k":"v"}},
	{"metadata":{"name":"b","namespace":"wj","uid":"u2","resourceVersion":"6"},"data":{"k":"v"}}]}`

// The real wiring: watch's socket asks its reconcile.Loop to verify. The
// fake apiserver lists a, then a and b, and its watch stays quiet: the
// relist finds b, which the watch lost.
func TestWatch_Relist(t *testing.T) {
	_, kubeconfig, db := watchFiles(t, fakeAPIServerListing(t, listA, listAB))
	ctx, _, stop := startWatch(t, defaultSettings(), db, kubeconfig)
	if head, err := inspect.NewClient(inspect.SocketPath(db)).Wait(ctx, 0); err != nil || head != 1 {
		t.Fatalf("waiting for the list through the socket: head %d, %v; want 1", head, err)
	}

	stdout, errOut, c := runCLI("relist", "--db", db)
	if c != 0 || !strings.HasPrefix(stdout, "relist: 1 divergences repaired\nOFFSET ") ||
		!strings.HasSuffix(stdout, "  ADDED  relist  wj/b  u2   6\n") || strings.Count(stdout, "\n") != 3 {
		t.Errorf("relist: exit %d, stdout\n%s\nstderr %q; want 1 divergence, offset 2 ADDED wj/b", c, stdout, errOut)
	}
	stdout, _, c = runCLI("stats", "--db", db)
	if c != 0 || !strings.Contains(stdout, "\nlists            2\n") ||
		!strings.Contains(stdout, "\nverifies         1\n") || !strings.Contains(stdout, "\ndivergences      1\n") {
		t.Errorf("stats after relist: exit %d, stdout\n%s\nwant 2 lists, 1 verify, 1 divergence", c, stdout)
	}

	stop()
}

// watch --verify-interval relists on its own: the divergence is found
// without asking, and later verifies find nothing more.
func TestWatch_VerifyInterval(t *testing.T) {
	_, kubeconfig, db := watchFiles(t, fakeAPIServerListing(t, listA, listAB))
	ctx, _, stop := startWatch(t, defaultSettings(), db, kubeconfig,
		"--verify-interval", "20ms", "--idle-timeout", "1h", "--request-timeout", "10s")

	s := inspect.NewClient(inspect.SocketPath(db))
	waitUntil(t, func() (bool, string) {
		st, err := s.Status(ctx)
		if err != nil {
			return false, err.Error()
		}
		return st.Verifies >= 2, fmt.Sprintf("status %+v; want 2 verifies", *st)
	})
	st, err := s.Status(ctx)
	if err != nil || st.Divergences != 1 || st.IdleRestarts != 0 {
		t.Errorf("status after verifies: %+v, %v; want 1 divergence, no idle restart", st, err)
	}
	if evs, err := s.Read(ctx, 2, 10); err != nil || len(evs) != 1 || evs[0].Key != "wj/b" || evs[0].Origin != journal.OriginRelist {
		t.Errorf("events from offset 2: %+v, %v; want ADDED wj/b, origin relist, alone", evs, err)
	}

	stop()
}
