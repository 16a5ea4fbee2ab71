package main

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/watchjournal/watchjournal/journal"
)

// eventsTable is `events` on the test journal.
const eventsTable = `OFFSET  TIME                      TYPE      ORIGIN  KEY   UID  RESOURCEVERSION
1       2026-07-01T12:00:00.123Z  ADDED     watch   wj/a  u1   10
2       2026-07-01T12:00:01.123Z  ADDED     watch   wj/b  u2   11
3       2026-07-01T12:00:02.123Z  MODIFIED  watch   wj/a  u1   12
4       2026-07-01T12:00:03.123Z  DELETED   relist  wj/b  u2   11
`

// eventsJSON is `events -o json` on the test journal.
const eventsJSON = `[
{"offset":1,"type":"ADDED","key":"wj/a","uid":"u1","resourceVersion":"10","time":"2026-07-01T12:00:00.123Z","origin":"watch","synthesized":false,"object":{"metadata":{"name":"wj/a"}}},
{"offset":2,"type":"ADDED","key":"wj/b","uid":"u2","resourceVersion":"11","time":"2026-07-01T12:00:01.123Z","origin":"watch","synthesized":false,"object":{"metadata":{"name":"wj/b"}}},
{"offset":3,"type":"MODIFIED","key":"wj/a","uid":"u1","resourceVersion":"12","prevResourceVersion":"10","time":"2026-07-01T12:00:02.123Z","origin":"watch","synthesized":false,"object":{"metadata":{"name":"wj/a"}}},
{"offset":4,"type":"DELETED","key":"wj/b","uid":"u2","resourceVersion":"11","time":"2026-07-01T12:00:03.123Z","origin":"relist","synthesized":true,"object":null}
]
`

func TestEvents_File(t *testing.T) {
	path := writeJournal(t)
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"table of every event", nil, eventsTable},
		{"from an offset", []string{"--from", "3"}, `OFFSET  TIME                      TYPE      ORIGIN  KEY   UID  RESOURCEVERSION
3       2026-07-01T12:00:02.123Z  MODIFIED  watch   wj/a  u1   12
4       2026-07-01T12:00:03.123Z  DELETED   relist  wj/b  u2   11
`},
		{"the next offset prints the header only", []string{"--from", "5"}, "OFFSET  TIME  TYPE  ORIGIN  KEY  UID  RESOURCEVERSION\n"},
		{"one JSON array, one event a line, a tombstone's object null", []string{"-o", "json"}, eventsJSON},
	} {
		t.Run(tc.name, func(t *testing.T) {
			stdout, stderr, code := runCLI(append([]string{"events", "--db", path}, tc.args...)...)
			if code != 0 || stdout != tc.want {
				t.Errorf("events %v: exit %d, stdout\n%s\nstderr %q; want 0 and\n%s", tc.args, code, stdout, stderr, tc.want)
			}
		})
	}
}

func TestEvents_File_EmptyJournal(t *testing.T) {
	path := filepath.Join(tempDir(t), "j.db")
	openJournal(t, path).Close()
	stdout, stderr, code := runCLI("events", "--db", path, "-o", "json")
	if code != 0 || stdout != "[\n]\n" {
		t.Errorf("events on an empty journal: exit %d, stdout %q, stderr %q; want 0 and an empty array", code, stdout, stderr)
	}
}

func TestEvents_File_Compacted(t *testing.T) {
	path := writeTrimmedTestJournal(t)

	_, stderr, code := runCLI("events", "--db", path, "--from", "1")
	want := "journalctl: journal: offset 1 was trimmed by retention, first retained offset is 3\n"
	if code != 1 || stderr != want {
		t.Errorf("events --from 1 after trimming to 3: exit %d, stderr %q; want 1 and %q", code, stderr, want)
	}
	stdout, _, code := runCLI("events", "--db", path)
	if code != 0 || stdout != `OFFSET  TIME                      TYPE      ORIGIN  KEY   UID  RESOURCEVERSION
3       2026-07-01T12:00:02.123Z  MODIFIED  watch   wj/a  u1   12
4       2026-07-01T12:00:03.123Z  DELETED   relist  wj/b  u2   11
` {
		t.Errorf("events from the first retained: exit %d, stdout\n%s", code, stdout)
	}
}

// Without a writer, a follower reopens the file every poll interval; a
// writer that opens the file meanwhile makes it wait, not fail.
func TestEvents_File_Follow(t *testing.T) {
	path := writeJournal(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	stdout, stderr, code := startCLIWith(ctx, fastPoll(), "events", "--db", path, "-f", "--from", "4")
	stdout.waitFor(t, followRow("4", "2026-07-01T12:00:03.123Z", "DELETED", "relist", "wj/b", "u2", "11"))

	j := openJournal(t, path)
	appendEvents(t, j, "13", ev(journal.Added, "wj/c", "u3", "13", 4))
	if err := j.Close(); err != nil {
		t.Fatal(err)
	}
	stdout.waitFor(t, followRow("5", "2026-07-01T12:00:04.123Z", "ADDED", "watch", "wj/c", "u3", "13"))

	cancel()
	if c := exitStatus(t, code); c != 0 {
		t.Errorf("exit %d after interrupt, stderr %q; want 0", c, stderr)
	}
}

// followRow is a row of events -f's table whose cells fit the columns'
// minimum widths (followWidths), each padded by two spaces.
func followRow(cells ...string) string {
	var b strings.Builder
	for i, c := range cells[:len(cells)-1] {
		fmt.Fprintf(&b, "%-*s", followWidths[i]+2, c)
	}
	return b.String() + cells[len(cells)-1] + "\n"
}

// A follower's table keeps its columns through later pages whose cells
// are wider than the first page's: ADDED relist first, then MODIFIED
// watch and DELETED restart.
func TestEvents_File_Follow_ColumnsLineUp(t *testing.T) {
	path := filepath.Join(tempDir(t), "j.db")
	j := openJournal(t, path)
	added := ev(journal.Added, "demo/a", "u1", "10", 0)
	added.Origin = journal.OriginRelist
	appendEvents(t, j, "10", added)
	j.Close()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	stdout, stderr, code := startCLIWith(ctx, fastPoll(), "events", "--db", path, "-f")
	stdout.waitFor(t, "relist")

	j = openJournal(t, path)
	mod := ev(journal.Modified, "demo/a", "u1", "11", 1)
	mod.PrevResourceVersion = "10"
	del := ev(journal.Deleted, "demo/a", "u1", "12", 2) // a key the index holds (Tx.Append checks)
	del.Origin, del.Object = journal.OriginRestart, nil
	appendEvents(t, j, "12", mod, del)
	j.Close()
	stdout.waitFor(t, "restart")
	cancel()
	if c := exitStatus(t, code); c != 0 {
		t.Fatalf("exit %d after interrupt, stderr %q; want 0", c, stderr)
	}

	lines := strings.Split(strings.TrimSuffix(stdout.String(), "\n"), "\n")
	if len(lines) != 4 {
		t.Fatalf("stdout\n%s\nwant a header and 3 rows", stdout)
	}
	header := lines[0]
	for _, col := range []string{"TIME", "TYPE", "ORIGIN", "KEY", "UID", "RESOURCEVERSION"} {
		at := strings.Index(header, " "+col) + 1
		for _, l := range lines[1:] {
			if len(l) <= at || l[at-1] != ' ' || l[at] == ' ' {
				t.Errorf("column %s starts at %d in the header, but not in row %q; stdout\n%s", col, at, l, stdout)
			}
		}
	}
}
