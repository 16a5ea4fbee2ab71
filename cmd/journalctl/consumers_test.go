package main

import (
	"context"
	"path/filepath"
	"strings"
	"testing"

	"github.com/watchjournal/watchjournal/journal"
)

// consumersTable is `consumers` on the test journal with billing at 2 and
// audit at 4, the head.
const consumersTable = `NAME     COMMITTED  LAG
audit    4          0
billing  2          2
`

// writeConsumersJournal creates a closed test journal with consumers
// billing at 2 and audit at 4.
func writeConsumersJournal(t *testing.T) string {
	t.Helper()
	path := writeStatsJournal(t)
	j := openJournal(t, path)
	commit(t, j, "audit", 4)
	if err := j.Close(); err != nil {
		t.Fatal(err)
	}
	return path
}

// commit registers consumer name in the writable j and commits off.
func commit(t *testing.T, j *journal.Journal, name string, off uint64) {
	t.Helper()
	c, err := j.Consumers().Open(name)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Commit(off); err != nil {
		t.Fatal(err)
	}
}

// committed returns consumer name's committed offset in j.
func committed(t *testing.T, j *journal.Journal, name string) uint64 {
	t.Helper()
	c, err := j.Consumers().Open(name)
	if err != nil {
		t.Fatal(err)
	}
	off, err := c.Committed()
	if err != nil {
		t.Fatal(err)
	}
	return off
}

func TestConsumers_File(t *testing.T) {
	path := writeConsumersJournal(t)
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"a table in name order", nil, consumersTable},
		{"one JSON array", []string{"-o", "json"}, `[
{"name":"audit","committed":4,"lag":0},
{"name":"billing","committed":2,"lag":2}
]
`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			stdout, stderr, code := runCLI(append([]string{"consumers", "--db", path}, tc.args...)...)
			if code != 0 || stdout != tc.want {
				t.Errorf("consumers %v: exit %d, stdout\n%s\nstderr %q; want 0 and\n%s", tc.args, code, stdout, stderr, tc.want)
			}
		})
	}
}

func TestConsumers_File_None(t *testing.T) {
	path := writeJournal(t)
	stdout, stderr, code := runCLI("consumers", "--db", path)
	if want := "NAME  COMMITTED  LAG\n"; code != 0 || stdout != want {
		t.Errorf("consumers without any: exit %d, stdout %q, stderr %q; want 0 and %q", code, stdout, stderr, want)
	}
}

func TestConsumers_File_Errors(t *testing.T) {
	stdout, stderr, code := runCLI("consumers", "--db", filepath.Join(tempDir(t), "missing.db"))
	if code != 2 || stdout != "" {
		t.Errorf("consumers of a missing file: exit %d, stdout %q, stderr %q; want 2 and nothing", code, stdout, stderr)
	}
}

func TestEvents_Consumer_File(t *testing.T) {
	path := writeConsumersJournal(t)
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"from the offset after billing's committed 2", []string{"--consumer", "billing"}, `OFFSET  TIME                      TYPE      ORIGIN  KEY   UID  RESOURCEVERSION
3       2026-07-01T12:00:02.123Z  MODIFIED  watch   wj/a  u1   12
4       2026-07-01T12:00:03.123Z  DELETED   relist  wj/b  u2   11
`},
		{"a consumer at the head prints the header only", []string{"--consumer", "audit"}, "OFFSET  TIME  TYPE  ORIGIN  KEY  UID  RESOURCEVERSION\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			stdout, stderr, code := runCLI(append([]string{"events", "--db", path}, tc.args...)...)
			if code != 0 || stdout != tc.want {
				t.Errorf("events %v: exit %d, stdout\n%s\nstderr %q; want 0 and\n%s", tc.args, code, stdout, stderr, tc.want)
			}
		})
	}

	// Without --commit nothing moves.
	j := openJournal(t, path)
	if got := committed(t, j, "billing"); got != 2 {
		t.Errorf("billing committed after events without --commit = %d; want 2", got)
	}
}

func TestEvents_Consumer_Errors(t *testing.T) {
	path := writeConsumersJournal(t)
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"an unknown consumer", []string{"--consumer", "nobody"}, `journal: no such consumer: "nobody"`},
		{"--commit without --consumer", []string{"--commit"}, "--commit needs --consumer"},
		{"--from with --consumer", []string{"--consumer", "billing", "--from", "3"}, "--from and --consumer exclude each other"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			stdout, stderr, code := runCLI(append([]string{"events", "--db", path}, tc.args...)...)
			if code != 1 || stdout != "" || !strings.Contains(stderr, tc.want) {
				t.Errorf("events %v: exit %d, stdout %q, stderr %q; want 1, nothing and %q", tc.args, code, stdout, stderr, tc.want)
			}
		})
	}
}

// The file holds no writer: --commit opens it writable for the commit.
func TestEvents_Consumer_File_Commit(t *testing.T) {
	path := writeConsumersJournal(t)
	stdout, stderr, code := runCLI("events", "--db", path, "--consumer", "billing", "--commit", "-o", "json")
	if code != 0 || strings.Count(stdout, "\n") != 4 || !strings.HasPrefix(stdout, "[\n"+`{"offset":3,`) {
		t.Fatalf("events --consumer billing --commit: exit %d, stdout %q, stderr %q; want 0 and events 3 and 4", code, stdout, stderr)
	}
	stdout, _, code = runCLI("events", "--db", path, "--consumer", "billing", "--commit", "-o", "json")
	if code != 0 || stdout != "[\n]\n" {
		t.Errorf("events --consumer billing --commit again: exit %d, stdout %q; want 0 and an empty array", code, stdout)
	}
	j := openJournal(t, path)
	if got := committed(t, j, "billing"); got != 4 {
		t.Errorf("billing committed after --commit = %d; want 4", got)
	}
}

// A consumer that retention has passed gets the compacted error, and its
// committed offset stays: nothing is skipped.
func TestEvents_Consumer_File_Compacted(t *testing.T) {
	path := filepath.Join(tempDir(t), "j.db")
	j := openJournal(t, path)
	commit(t, j, "slow", 0) // registered before any event: committed 0
	appendEvents(t, j, "12", testEvents()...)
	if _, _, err := j.Writer().Trim(3, 10, 0, 0); err != nil {
		t.Fatal(err)
	}
	j.Close()

	for _, args := range [][]string{{"--consumer", "slow"}, {"--consumer", "slow", "--commit"}, {"--consumer", "slow", "-f"}} {
		stdout, stderr, code := runCLI(append([]string{"events", "--db", path, "-o", "json"}, args...)...)
		want := "journalctl: journal: offset 1 was trimmed by retention, first retained offset is 3\n"
		if code != 1 || stdout != "" || stderr != want {
			t.Errorf("events %v behind retention: exit %d, stdout %q, stderr %q; want 1, nothing and %q", args, code, stdout, stderr, want)
		}
	}
	j = openJournal(t, path)
	if got := committed(t, j, "slow"); got != 0 {
		t.Errorf("slow committed after the compacted error = %d; want 0", got)
	}
}

// A follower without a writer commits each page through a brief writable
// open, between the writers that come and go.
func TestEvents_Consumer_File_FollowCommit(t *testing.T) {
	path := writeConsumersJournal(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	stdout, stderr, code := startCLIWith(ctx, fastPoll(), "events", "--db", path, "--consumer", "billing", "--commit", "-f", "-o", "json")
	stdout.waitFor(t, `{"offset":4,`)

	j := openJournal(t, path)
	appendEvents(t, j, "13", ev(journal.Added, "wj/c", "u3", "13", 4))
	if err := j.Close(); err != nil {
		t.Fatal(err)
	}
	stdout.waitFor(t, `{"offset":5,`)
	cancel()
	if c := exitStatus(t, code); c != 0 || strings.Count(stdout.String(), "\n") != 3 {
		t.Errorf("exit %d, stdout %q, stderr %q; want 0 and events 3 to 5", c, stdout, stderr)
	}
	if got := committed(t, openJournal(t, path), "billing"); got != 5 {
		t.Errorf("billing committed after following to 5 = %d; want 5", got)
	}
}
