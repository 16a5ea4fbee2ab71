package main

import (
	"encoding/json"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/watchjournal/watchjournal/journal"
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
	c, err := j.Consumer("billing")
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
	if err := j.SetRetention(bounded); err != nil {
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
