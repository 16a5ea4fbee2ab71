package main

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"

	"github.com/watchjournal/watchjournal/journal"
	"github.com/watchjournal/watchjournal/journal/inspect"
	"github.com/watchjournal/watchjournal/reconcile"
)

// watching is the status the test servers report.
var watching = reconcile.Status{
	Phase: reconcile.PhaseWatching, ResourceVersion: "12", Synced: true,
	Lists: 2, Watches: 5, Gone: 1, IdleRestarts: 3, Events: 7, Verifies: 1,
	LastError: errors.New("reconcile: watch failed: boom"),
	ListMode:  reconcile.ListModePaginated, ListModeReason: "the server refused",
}

// fakeLoop is the reconcile loop as the socket sees it. Its Verify runs
// repair in a goroutine of its own, when repair is set, and then counts a
// list and a verify, with repair's result as divergences; with no repair a
// verify never completes.
type fakeLoop struct {
	wg sync.WaitGroup // the repair goroutines

	mu       sync.Mutex
	repair   func() int
	status   reconcile.Status
	changed  chan struct{} // closed and replaced on every status change
	requests int           // Verify calls
}

// newFakeLoop returns a fakeLoop reporting st. The test's end waits for its
// repairs: create it after the journal they write, so that they end first.
func newFakeLoop(t *testing.T, st reconcile.Status, repair func() int) *fakeLoop {
	l := &fakeLoop{repair: repair, status: st, changed: make(chan struct{})}
	t.Cleanup(l.wg.Wait)
	return l
}

func (l *fakeLoop) InspectStatus() inspect.LoopStatus {
	l.mu.Lock()
	defer l.mu.Unlock()
	return inspectStatus(l.status)
}

// inspectStatus is st as the socket reports it, as reconcile.Loop's
// InspectStatus converts it.
func inspectStatus(st reconcile.Status) inspect.LoopStatus {
	return inspect.LoopStatus{
		Phase: string(st.Phase), ResourceVersion: st.ResourceVersion, Synced: st.Synced, LastError: st.LastError,
		Lists: st.Lists, Watches: st.Watches, Gone: st.Gone, ListRestarts: st.ListRestarts,
		IdleRestarts: st.IdleRestarts, Events: st.Events, Verifies: st.Verifies, Divergences: st.Divergences,
		ListPages: st.ListPages, ListObjects: st.ListObjects, ListMode: string(st.ListMode),
		ListModeReason: st.ListModeReason, Encoding: st.Encoding, ShardMode: string(st.ShardMode),
	}
}

func (l *fakeLoop) Verify() {
	l.mu.Lock()
	l.requests++
	repair := l.repair
	l.mu.Unlock()
	if repair == nil {
		return
	}
	l.wg.Add(1)
	go func() { // exits once repair returns
		defer l.wg.Done()
		n := repair()
		l.update(func(st *reconcile.Status) { st.Lists++; st.Verifies++; st.Divergences += n; st.Events += n })
	}()
}

func (l *fakeLoop) WaitForInspect(ctx context.Context, cond func(inspect.LoopStatus) bool) error {
	for {
		l.mu.Lock()
		st, ch := l.status, l.changed
		l.mu.Unlock()
		if cond(inspectStatus(st)) {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-ch:
		}
	}
}

func (l *fakeLoop) update(fn func(*reconcile.Status)) {
	l.mu.Lock()
	defer l.mu.Unlock()
	fn(&l.status)
	close(l.changed)
	l.changed = make(chan struct{})
}

// setRepair replaces the verify's repair.
func (l *fakeLoop) setRepair(repair func() int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.repair = repair
}

// verifyRequests returns how many times Verify was called.
func (l *fakeLoop) verifyRequests() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.requests
}

var _ inspect.Loop = (*fakeLoop)(nil)

// serveJournal serves j on its socket as watch does, with a fakeLoop whose
// status is watching and whose verifies never complete; stop ends it, and
// the test's end does too.
func serveJournal(t *testing.T, j *journal.Journal, maxWait time.Duration) (stop func()) {
	t.Helper()
	return serveLoop(t, j, newFakeLoop(t, watching, nil), maxWait)
}

// serveLoop serves j on its socket as watch does, with loop as its
// reconcile loop; stop ends it, and the test's end does too.
func serveLoop(t *testing.T, j *journal.Journal, loop inspect.Loop, maxWait time.Duration) (stop func()) {
	t.Helper()
	h := inspect.Handler(j, loop, &inspect.Options{MaxWait: maxWait, PID: -1})
	stop, err := inspect.Listen(inspect.SocketPath(j.Path()), h, logr.Discard())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(stop)
	return stop
}

// writerJournal opens the test journal with billing at 2 for writing, and
// checks that the file is then locked to other opens.
func writerJournal(t *testing.T) *journal.Journal {
	t.Helper()
	j := openJournal(t, writeStatsJournal(t))
	if _, err := journal.Open(j.Path(), &journal.Options{ReadOnly: true, Timeout: -1}); !errors.Is(err, journal.ErrLocked) {
		t.Fatalf("read-only open while a writer holds the file: %v; want ErrLocked", err)
	}
	return j
}

func TestSocket_ReadCommands(t *testing.T) {
	j := writerJournal(t)
	serveJournal(t, j, maxWait)
	path := j.Path()
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"events", []string{"events", "--db", path}, eventsTable},
		{"events as JSON", []string{"events", "--db", path, "-o", "json"}, eventsJSON},
		{"index", []string{"index", "--db", path}, "KEY   UID  RESOURCEVERSION\nwj/a  u1   12\n"},
		{"stats with the writer's status", []string{"stats", "--db", path},
			statsTable + writerRows},
	} {
		t.Run(tc.name, func(t *testing.T) {
			stdout, stderr, code := runCLI(tc.args...)
			if got := sizes.ReplaceAllString(stdout, "N bytes"); code != 0 || got != tc.want {
				t.Errorf("%v: exit %d, stdout\n%s\nstderr %q; want 0 and\n%s", tc.args, code, stdout, stderr, tc.want)
			}
		})
	}
	t.Run("stats as JSON", func(t *testing.T) {
		stdout, _, code := runCLI("stats", "--db", path, "-o", "json")
		want := `"writer":{"phase":"Watching","resourceVersion":"12","synced":true,"lastError":"reconcile: watch failed: boom",` +
			`"lists":2,"watches":5,"gone":1,"listRestarts":0,"idleRestarts":3,"events":7,"verifies":1,"divergences":0,` +
			`"listPages":0,"listObjects":0,"listMode":"paginated","listModeReason":"the server refused"}}`
		if code != 0 || !strings.Contains(stdout, `"lastOffset":4,`) || !strings.HasSuffix(stdout, want+"\n") {
			t.Errorf("stats -o json: exit %d, stdout %s; want lastOffset 4 and %s", code, stdout, want)
		}
	})
}

// writerRows are the rows stats adds for a watch reporting watching.
const writerRows = `phase            Watching
last error       reconcile: watch failed: boom
list mode        paginated (the server refused)
lists            2
watches          5
410s             1
idle restarts    3
verifies         1
divergences      0
`

func TestSocket_CompactedIsDistinguishable(t *testing.T) {
	j := writerJournal(t)
	if _, _, err := j.Writer().Trim(3, 10, 0, 0); err != nil {
		t.Fatal(err)
	}
	serveJournal(t, j, maxWait)

	_, err := inspect.NewClient(inspect.SocketPath(j.Path())).Read(context.Background(), 1, 10)
	var ce *journal.TrimmedError
	if !errors.As(err, &ce) || *ce != (journal.TrimmedError{Requested: 1, First: 3}) || !errors.Is(err, journal.ErrTrimmed) {
		t.Errorf("Read(1) through the socket = %v; want *journal.TrimmedError{1, 3}", err)
	}
	_, stderr, code := runCLI("events", "--db", j.Path(), "--from", "1")
	if want := "journalctl: journal: offset 1 was trimmed by retention, first retained offset is 3\n"; code != 1 || stderr != want {
		t.Errorf("events --from 1: exit %d, stderr %q; want 1 and %q", code, stderr, want)
	}
}

func TestSocket_WaitAnswersWithTheHeadAfterMaxWait(t *testing.T) {
	j := writerJournal(t)
	serveJournal(t, j, time.Millisecond)
	head, err := inspect.NewClient(inspect.SocketPath(j.Path())).Wait(context.Background(), 4)
	if head != 4 || err != nil {
		t.Errorf("Wait(4) with nothing new = %d, %v; want 4, nil", head, err)
	}
}

func TestSocket_Follow(t *testing.T) {
	j := writerJournal(t)
	serveJournal(t, j, maxWait)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	stdout, stderr, code := startCLI(ctx, "events", "--db", j.Path(), "-f", "-o", "json")
	stdout.waitFor(t, `{"offset":4,`)

	appendEvents(t, j, "13", ev(journal.Added, "wj/c", "u3", "13", 4))
	stdout.waitFor(t, `{"offset":5,"type":"ADDED","key":"wj/c","uid":"u3","resourceVersion":"13",`)

	cancel()
	if c := exitStatus(t, code); c != 0 || strings.Count(stdout.String(), "\n") != 5 {
		t.Errorf("exit %d, stdout %q, stderr %q; want 0 and 5 events", c, stdout, stderr)
	}
}

// With nothing retained (every event trimmed) a follower from offset 0
// waits past the head: the next event is the first it prints.
func TestSocket_Follow_NothingRetained(t *testing.T) {
	j := writerJournal(t)
	if _, _, err := j.Writer().Trim(5, 10, 0, 0); err != nil {
		t.Fatal(err)
	}
	serveJournal(t, j, maxWait)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	stdout, stderr, code := startCLI(ctx, "events", "--db", j.Path(), "-f", "-o", "json")

	appendEvents(t, j, "13", ev(journal.Added, "wj/c", "u3", "13", 4))
	stdout.waitFor(t, `{"offset":5,"type":"ADDED","key":"wj/c",`)
	cancel()
	if c := exitStatus(t, code); c != 0 || strings.Count(stdout.String(), "\n") != 1 {
		t.Errorf("exit %d, stdout %q, stderr %q; want 0 and event 5 only", c, stdout, stderr)
	}
}

// A follower moves from the file to a watch's socket when a watch starts,
// and back when it stops.
func TestFollow_MovesBetweenFileAndSocket(t *testing.T) {
	path := writeJournal(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	stdout, stderr, code := startCLIWith(ctx, fastPoll(), "events", "--db", path, "-f", "--from", "4")
	stdout.waitFor(t, "\n4 ")

	// The file stays locked until event 5 is read: only the socket has it.
	j, err := journal.Open(path, &journal.Options{Resource: &testResource, NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	stop := serveJournal(t, j, maxWait)
	appendEvents(t, j, "13", ev(journal.Added, "wj/c", "u3", "13", 4))
	stdout.waitFor(t, "\n5 ")
	stop()
	if err := j.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(inspect.SocketPath(path)); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("socket after stop: %v; want it removed", err)
	}

	j = openJournal(t, path)
	appendEvents(t, j, "14", ev(journal.Added, "wj/d", "u4", "14", 5))
	j.Close()
	stdout.waitFor(t, followRow("6", "2026-07-01T12:00:05.123Z", "ADDED", "watch", "wj/d", "u4", "14"))

	cancel()
	if c := exitStatus(t, code); c != 0 {
		t.Errorf("exit %d, stderr %q; want 0", c, stderr)
	}
}

func TestSocket_LockedWithoutWatch(t *testing.T) {
	j := writerJournal(t)
	_, stderr, code := runCLI("stats", "--db", j.Path())
	if code != 2 || !strings.Contains(stderr, "locked") || !strings.Contains(stderr, "no watch serves "+inspect.SocketPath(j.Path())) {
		t.Errorf("stats on a file locked by a writer without a socket: exit %d, stderr %q; want 2 and a clear line", code, stderr)
	}
}

func TestServe_ReplacesAStaleSocket(t *testing.T) {
	path := filepath.Join(tempDir(t), "j.db")
	if err := os.WriteFile(inspect.SocketPath(path), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	j := openJournal(t, path)
	appendEvents(t, j, "12", testEvents()...)
	serveJournal(t, j, maxWait)
	if stdout, stderr, code := runCLI("index", "--db", path); code != 0 || stdout != "KEY   UID  RESOURCEVERSION\nwj/a  u1   12\n" {
		t.Errorf("index through a socket that replaced a stale one: exit %d, stdout %q, stderr %q", code, stdout, stderr)
	}
}
