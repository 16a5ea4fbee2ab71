package main

import (
	"context"
	"encoding/json"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr"

	"github.com/watchjournal/watchjournal/journal"
	"github.com/watchjournal/watchjournal/journal/compactor"
	"github.com/watchjournal/watchjournal/journal/inspect"
)

// sizes hides the byte sizes, which depend on bbolt's page layout.
var sizes = regexp.MustCompile(`\d+ bytes`)

// statsTable is `stats` on the test journal with consumer billing at 2,
// sizes hidden.
const statsTable = `resource         configmaps.v1 -n wj
objects          1
first offset     1
last offset      4
resourceVersion  12
file size        N bytes
journal size     N bytes
retention        none
consumers        billing=2 (lag 2)
`

// writeStatsJournal creates a closed test journal with consumer billing
// committed at 2.
func writeStatsJournal(t *testing.T) string {
	t.Helper()
	path := filepath.Join(tempDir(t), "j.db")
	j := openJournal(t, path)
	appendEvents(t, j, "12", testEvents()...)
	c, err := j.Consumers().Open("billing")
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Commit(2); err != nil {
		t.Fatal(err)
	}
	if err := j.Close(); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestStats_File(t *testing.T) {
	path := writeStatsJournal(t)
	stdout, stderr, code := runCLI("stats", "--db", path)
	if got := sizes.ReplaceAllString(stdout, "N bytes"); code != 0 || got != statsTable {
		t.Errorf("stats: exit %d, stdout\n%s\nstderr %q; want 0 and\n%s", code, stdout, stderr, statsTable)
	}

	stdout, _, code = runCLI("stats", "--db", path, "-o", "json")
	var got jsonStats
	if err := json.Unmarshal([]byte(stdout), &got); err != nil || code != 0 {
		t.Fatalf("stats -o json: exit %d, %v: %q", code, err, stdout)
	}
	want := inspect.Resource{Version: "v1", Resource: "configmaps", Namespace: "wj"}
	if got.Resource != want || got.Objects != 1 || got.FirstOffset != 1 || got.LastOffset != 4 ||
		got.ResourceVersion != "12" || got.FileSize <= 0 || got.Consumers["billing"] != 2 || got.Lag["billing"] != 2 ||
		got.Retention == nil || *got.Retention != (inspect.Retention{}) || got.Writer != nil {
		t.Errorf("stats -o json = %+v; want resource %+v, 1 object, offsets 1 to 4, RV 12, billing at 2 with lag 2, no retention, no writer", got, want)
	}
}

// bounded is the retention the retention tests record.
var bounded = journal.Retention{MaxEvents: 10000, MaxBytes: 64 << 20, MaxAge: 24 * time.Hour, HardMaxBytes: 1 << 30}

// writeRetentionJournal creates a closed test journal with consumer
// billing at 2 and the retention bounded.
func writeRetentionJournal(t *testing.T) string {
	t.Helper()
	path := writeStatsJournal(t)
	j := openJournal(t, path)
	if err := j.Settings().SetRetention(bounded); err != nil {
		t.Fatal(err)
	}
	if err := j.Close(); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestStats_Retention(t *testing.T) {
	const line = "retention        events 10000, bytes 64Mi, age 24h0m0s, hard bytes 1Gi\n"
	const jsonPart = `"lag":{"billing":2},"retention":{"maxEvents":10000,"maxBytes":67108864,"maxAge":"24h0m0s","hardMaxBytes":1073741824}`
	check := func(t *testing.T, path string) {
		t.Helper()
		stdout, stderr, code := runCLI("stats", "--db", path)
		if code != 0 || !strings.Contains(stdout, line) || !strings.Contains(stdout, "consumers        billing=2 (lag 2)\n") {
			t.Errorf("stats: exit %d, stdout\n%s\nstderr %q; want 0 with\n%sand billing's lag", code, stdout, stderr, line)
		}
		stdout, _, code = runCLI("stats", "--db", path, "-o", "json")
		if code != 0 || !strings.Contains(stdout, jsonPart) {
			t.Errorf("stats -o json: exit %d, stdout %s; want %s", code, stdout, jsonPart)
		}
	}
	path := writeRetentionJournal(t)
	t.Run("from the file", func(t *testing.T) { check(t, path) })
	t.Run("through the socket", func(t *testing.T) {
		serveJournal(t, openJournal(t, path), maxWait)
		check(t, path)
	})
}

// Ensure stats shows the retention of a compactor running in the process
// that holds the file (an operator: jcache runs one by default), read
// through its socket: the compactor records its policy in the file, so
// stats does not say "none" while one trims.
func TestStats_RetentionOfARunningCompactor(t *testing.T) {
	path := writeStatsJournal(t)
	j := openJournal(t, path)
	serveJournal(t, j, maxWait)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- compactor.New(j, bounded, compactor.Options{}).Run(ctx) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("compactor Run = %v", err)
		}
	}()
	const line = "retention        events 10000, bytes 64Mi, age 24h0m0s, hard bytes 1Gi\n"
	deadline := time.Now().Add(10 * time.Second)
	for {
		stdout, stderr, code := runCLI("stats", "--db", path)
		if code == 0 && strings.Contains(stdout, line) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("stats with a compactor running: exit %d, stdout\n%s\nstderr %q; want 0 with\n%s", code, stdout, stderr, line)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// Ensure that stats on a directory (a jcache cache directory) prints one
// line per journal file: a closed file read directly, a file a writer
// holds read through its inspect socket, and a file held by a writer that
// serves no socket named as unreadable, with a failing exit.
func TestStats_Dir(t *testing.T) {
	dir := tempDir(t)
	closed := openJournal(t, filepath.Join(dir, "a.db"))
	appendEvents(t, closed, "12", testEvents()...)
	if err := closed.Settings().SetRetention(journal.Retention{MaxBytes: 64 << 20}); err != nil {
		t.Fatal(err)
	}
	if err := closed.Close(); err != nil {
		t.Fatal(err)
	}
	served := openJournal(t, filepath.Join(dir, "b.db"))
	appendEvents(t, served, "12", testEvents()[:2]...)
	stop, err := inspect.Listen(inspect.SocketPath(served.Path()), inspect.Handler(served, nil, nil), logr.Discard())
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	openJournal(t, filepath.Join(dir, "c.db")) // held, no socket

	stdout, stderr, code := runCLI("stats", "--db", dir)
	lines := strings.Split(strings.TrimSpace(stdout), "\n")
	if code == 0 || len(lines) != 4 || !strings.Contains(stderr, "1 of 3 files") {
		t.Fatalf("stats DIR: exit %d, stdout\n%s\nstderr %q; want 4 lines and an error for 1 of 3 files", code, stdout, stderr)
	}
	for i, want := range []*regexp.Regexp{
		regexp.MustCompile(`^FILE\s+RESOURCE\s+OBJECTS\s+EVENTS\s+OFFSETS\s+JOURNAL\s+FILE SIZE\s+RETENTION\s+VIA$`),
		regexp.MustCompile(`^a\.db\s+configmaps\.v1 -n wj\s+1\s+4\s+1-4\s+\S+\s+\S+\s+bytes 64\S*\s+file$`),
		regexp.MustCompile(`^b\.db\s+configmaps\.v1 -n wj\s+2\s+2\s+1-2\s+\S+\s+\S+\s+none\s+socket$`),
		regexp.MustCompile(`^c\.db\s+(-\s+){7}unreadable: .*locked.*no watch serves .*c\.db\.sock`),
	} {
		if !want.MatchString(lines[i]) {
			t.Errorf("line %d = %q; want %v", i, lines[i], want)
		}
	}

	stdout, _, _ = runCLI("stats", "--db", dir, "-o", "json")
	var rows []dirFileStats
	if err := json.Unmarshal([]byte(stdout), &rows); err != nil || len(rows) != 3 {
		t.Fatalf("stats DIR -o json = %q, %v; want 3 rows", stdout, err)
	}
	if rows[0].Via != "file" || rows[0].Stats == nil || rows[0].LastOffset != 4 || rows[0].Retention == nil ||
		rows[1].Via != "socket" || rows[1].Stats == nil || rows[1].Objects != 2 ||
		rows[2].Stats != nil || !strings.Contains(rows[2].Error, "c.db.sock") {
		t.Errorf("stats DIR -o json = %s", stdout)
	}
}
