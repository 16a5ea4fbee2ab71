package main

import (
	"context"
	"errors"
	"net"
	"net/http"
	"strings"
	"testing"

	"github.com/watchjournal/watchjournal/journal"
	"github.com/watchjournal/watchjournal/journal/inspect"
)

// servedConsumersJournal opens the test journal with billing at 2 and
// audit at 4 for writing, and serves it on its socket as watch does.
func servedConsumersJournal(t *testing.T) *journal.Journal {
	t.Helper()
	j := openJournal(t, writeConsumersJournal(t))
	serveJournal(t, j, maxWait)
	return j
}

func TestSocket_Consumers(t *testing.T) {
	j := servedConsumersJournal(t)
	stdout, stderr, code := runCLI("consumers", "--db", j.Path())
	if code != 0 || stdout != consumersTable {
		t.Errorf("consumers through the socket: exit %d, stdout\n%s\nstderr %q; want 0 and\n%s", code, stdout, stderr, consumersTable)
	}
}

func TestSocket_Events_Consumer_Commit(t *testing.T) {
	j := servedConsumersJournal(t)
	stdout, stderr, code := runCLI("events", "--db", j.Path(), "--consumer", "billing", "--commit", "-o", "json")
	if code != 0 || strings.Count(stdout, "\n") != 4 || !strings.HasPrefix(stdout, "[\n"+`{"offset":3,`) || !strings.HasSuffix(stdout, "\n]\n") {
		t.Fatalf("events --consumer billing --commit: exit %d, stdout %q, stderr %q; want 0 and events 3 and 4", code, stdout, stderr)
	}
	if got := committed(t, j, "billing"); got != 4 {
		t.Errorf("billing committed after --commit through the socket = %d; want 4", got)
	}
}

// A follower with --commit commits each page it prints, and what it
// printed before an interrupt.
func TestSocket_Events_Consumer_FollowCommit(t *testing.T) {
	j := servedConsumersJournal(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	stdout, stderr, code := startCLI(ctx, "events", "--db", j.Path(), "--consumer", "audit", "--commit", "-f", "-o", "json")

	appendEvents(t, j, "13", ev(journal.Added, "wj/c", "u3", "13", 4))
	stdout.waitFor(t, `{"offset":5,"type":"ADDED","key":"wj/c",`)
	cancel()
	if c := exitStatus(t, code); c != 0 || strings.Count(stdout.String(), "\n") != 1 {
		t.Errorf("exit %d, stdout %q, stderr %q; want 0 and event 5 only", c, stdout, stderr)
	}
	if got := committed(t, j, "audit"); got != 5 {
		t.Errorf("audit committed after following event 5 = %d; want 5", got)
	}
}

func TestSocket_Events_Consumer_Compacted(t *testing.T) {
	j := servedConsumersJournal(t)
	if _, _, err := j.Writer().Trim(4, 10, 0, 0); err != nil {
		t.Fatal(err)
	}
	_, stderr, code := runCLI("events", "--db", j.Path(), "--consumer", "billing", "--commit")
	if want := "journalctl: journal: offset 3 was trimmed by retention, first retained offset is 4\n"; code != 1 || stderr != want {
		t.Errorf("events --consumer billing behind retention: exit %d, stderr %q; want 1 and %q", code, stderr, want)
	}
	if got := committed(t, j, "billing"); got != 2 {
		t.Errorf("billing committed after the compacted error = %d; want 2", got)
	}
}

func TestSocket_Commit(t *testing.T) {
	j := servedConsumersJournal(t)
	commit(t, j, "team/billing", 1)
	s := inspect.NewClient(inspect.SocketPath(j.Path()))
	ctx := context.Background()
	hc := unixHTTPClient(inspect.SocketPath(j.Path()))

	t.Run("a name with a slash is one path segment", func(t *testing.T) {
		if err := s.Commit(ctx, "team/billing", 3); err != nil {
			t.Fatalf("Commit(team/billing, 3) = %v", err)
		}
		if got := committed(t, j, "team/billing"); got != 3 {
			t.Errorf("team/billing committed = %d; want 3", got)
		}
	})
	t.Run("an unknown consumer is refused, not registered", func(t *testing.T) {
		err := s.Commit(ctx, "nobody", 1)
		if err == nil || !strings.Contains(err.Error(), `journal: no such consumer: "nobody"`) {
			t.Errorf("Commit(nobody, 1) = %v; want no such consumer", err)
		}
		if _, err := j.Consumers().Committed("nobody"); !errors.Is(err, journal.ErrNoConsumer) {
			t.Error("Commit(nobody) registered the consumer")
		}
	})
	for _, off := range []uint64{0, 5} {
		if err := s.Commit(ctx, "billing", off); err == nil || !strings.Contains(err.Error(), "outside 1 to the head") {
			t.Errorf("Commit(billing, %d) with head 4 = %v; want an offset outside 1 to the head", off, err)
		}
	}
	if got := committed(t, j, "billing"); got != 2 {
		t.Errorf("billing committed after refused commits = %d; want 2", got)
	}

	// The status codes say which is which.
	for _, tc := range []struct {
		path string
		want int
	}{
		{"/consumers/nobody/commit?offset=1", http.StatusNotFound},
		{"/consumers/billing/commit?offset=9", http.StatusBadRequest},
		{"/consumers/billing/commit", http.StatusBadRequest},
		{"/consumers/billing/commit?offset=x", http.StatusBadRequest},
	} {
		req, _ := http.NewRequest(http.MethodPost, "http://journal"+tc.path, nil)
		resp, err := hc.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != tc.want {
			t.Errorf("POST %s: %s; want %d", tc.path, resp.Status, tc.want)
		}
	}
	resp, err := hc.Get("http://journal/consumers/billing/commit?offset=3")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode == http.StatusOK {
		t.Error("GET /consumers/billing/commit succeeded; want only POST to commit")
	}
}

// Without a writer the commit opens the file itself; a writer that took it
// meanwhile gives journal.ErrLocked, on which events looks for the socket.
func TestFileSource_Commit_Locked(t *testing.T) {
	path := writeConsumersJournal(t)
	j := openJournal(t, path)
	err := fileSource{path: path}.Commit(context.Background(), "billing", 3)
	if !errors.Is(err, journal.ErrLocked) || !handover(err) {
		t.Errorf("fileSource.Commit while a writer holds the file = %v; want ErrLocked", err)
	}
	if got := committed(t, j, "billing"); got != 2 {
		t.Errorf("billing committed = %d; want 2", got)
	}
}

// unixHTTPClient returns an HTTP client that dials the unix socket sock,
// for requests inspect.Client does not make.
func unixHTTPClient(sock string) *http.Client {
	dial := func(ctx context.Context, _, _ string) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, "unix", sock)
	}
	return &http.Client{Transport: &http.Transport{DialContext: dial}}
}
