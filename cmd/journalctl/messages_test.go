package main

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/watchjournal/watchjournal/journal"
)

// What the CLI says for arguments and flags it cannot take: each a
// sentence that names the fix, no strconv or cobra text.
func TestMessages_Usage(t *testing.T) {
	path := writeJournal(t)
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"--from not a number says what an offset is", []string{"events", "--db", path, "--from", "abc"},
			`journalctl: invalid argument "abc" for "--from" flag: want an offset: a whole number, 1 or more (0 means the first retained event)` + "\n"},
		{"--from past the head says so", []string{"events", "--db", path, "--from", "999"},
			"journalctl: offset 999 is past the head: the last event has offset 4, the next will have 5\n"},
		{"a file as argument suggests --db", []string{"events", "cm.db"},
			"journalctl: events takes no arguments; for the journal file say --db cm.db\n"},
		{"--from with --consumer exclude each other in words", []string{"events", "--db", path, "--from", "2", "--consumer", "c"},
			"journalctl: --from and --consumer exclude each other: --consumer NAME reads from NAME's committed offset + 1; give one of them\n"},
		{"watch without a resource names RESOURCE", []string{"watch", "--db", "x.db"},
			"journalctl: watch needs the RESOURCE to journal, e.g. journalctl watch configmaps --db FILE\n"},
		{"--retain-age takes days, and says what it takes", []string{"watch", "cm", "--db", path, "--retain-age", "week"},
			`journalctl: invalid argument "week" for "--retain-age" flag: want a duration such as 90m, 24h, 7d or 1d12h` + "\n"},
		{"--since says what a time is", []string{"events", "--db", path, "--since", "yesterday"},
			`journalctl: --since "yesterday": want an RFC 3339 time (2026-07-01T12:00:00Z) or a duration ago (10m, 2h, 1d)` + "\n"},
		{"-n with --consumer", []string{"events", "--db", path, "-n", "2", "--consumer", "c"},
			"journalctl: -n and -r read back from the head: they exclude --consumer, which reads on from its position\n"},
		{"-r with -f", []string{"events", "--db", path, "-r", "-f"},
			"journalctl: --reverse and --follow exclude each other: new events come last\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			stdout, stderr, code := runCLI(tc.args...)
			if code != 1 || stdout != "" || stderr != tc.want {
				t.Errorf("journalctl %v: exit %d, stdout %q, stderr %q; want 1, nothing and %q", tc.args, code, stdout, stderr, tc.want)
			}
		})
	}
}

// --retain-age 7d is a week: the watch's flag parses days; its help gives
// examples, not a default.
func TestDaysValue(t *testing.T) {
	stdout, _, _ := runCLI("watch", "--help")
	if !strings.Contains(stdout, "e.g. 90m, 24h, 7d (unset: no age limit)\n") {
		t.Errorf("watch --help:\n%s\nwant --retain-age's help to end in examples and what unset means, with no default", stdout)
	}
	for s, want := range map[string]time.Duration{"1d": 24 * time.Hour, "7d": 7 * 24 * time.Hour, "1d12h": 36 * time.Hour, "90m": 90 * time.Minute} {
		var d time.Duration
		if err := (daysValue{&d}).Set(s); err != nil || d != want {
			t.Errorf("--retain-age %s = %v, %v; want %v", s, d, err, want)
		}
	}
}

// With -f, --from past the head waits for it and says so on stderr; it
// exits 0 when interrupted.
func TestEvents_FromPastHead_Follow(t *testing.T) {
	path := writeJournal(t)
	ctx, cancel := context.WithCancel(context.Background())
	stdout, stderr, code := startCLI(ctx, "events", "--db", path, "--from", "999", "-f")
	stderr.waitFor(t, "journalctl: offset 999 is past the head (4): waiting for it\n")
	cancel()
	if c := exitStatus(t, code); c != 0 || stdout.String() != "" {
		t.Errorf("exit %d, stdout %q; want 0 and nothing", c, stdout)
	}
}

// An offset trimmed by retention is an error with nothing on stdout: no
// table header before it.
func TestEvents_Trimmed_NoHeader(t *testing.T) {
	path := writeTrimmedTestJournal(t)
	for _, format := range []string{"table", "json"} {
		stdout, stderr, code := runCLI("events", "--db", path, "--from", "1", "-o", format)
		if code != 1 || stdout != "" || !strings.Contains(stderr, "offset 1") {
			t.Errorf("events --from 1 -o %s after trimming to 3: exit %d, stdout %q, stderr %q; want 1, nothing, the error", format, code, stdout, stderr)
		}
	}
}

// stats shows a journal of every namespace (watch -A) as such.
func TestStats_AllNamespaces(t *testing.T) {
	path := filepath.Join(tempDir(t), "j.db")
	all := testResource
	all.Namespace = ""
	j, err := journal.Open(path, &journal.Options{Resource: &all, NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	appendEvents(t, j, "10", ev(journal.Added, "wj/a", "u1", "10", 0))
	j.Close()
	stdout, stderr, code := runCLI("stats", "--db", path)
	if code != 0 || !strings.Contains(stdout, "configmaps.v1 (all namespaces)\n") {
		t.Errorf("stats: exit %d, stdout\n%s\nstderr %q; want the resource as configmaps.v1 (all namespaces)", code, stdout, stderr)
	}
}

// The exit statuses are in --help.
func TestHelp_ExitStatus(t *testing.T) {
	stdout, _, code := runCLI("--help")
	for _, want := range []string{"Exit status:", "  2  the journal file cannot be opened, read or written", "read-only file system", "  3  verify found problems"} {
		if code != 0 || !strings.Contains(stdout, want) {
			t.Errorf("journalctl --help: exit %d, stdout\n%s\nwant it to contain %q", code, stdout, want)
		}
	}
}

// compact exits with the file-error status 2 when it cannot write next to
// the file (a read-only file system, no space, no permission), as --help
// says.
func TestCompact_FileSystemError(t *testing.T) {
	path := writeJournal(t)
	// A non-empty directory where compact writes FILE.compact: its
	// removal fails as a write on a read-only file system would.
	if err := os.MkdirAll(filepath.Join(path+".compact", "x"), 0o700); err != nil {
		t.Fatal(err)
	}
	_, stderr, code := runCLI("compact", "--db", path)
	if code != 2 || !strings.Contains(stderr, path+".compact") {
		t.Errorf("compact with FILE.compact unremovable: exit %d, stderr %q; want 2 and the path", code, stderr)
	}
	erofs := &os.PathError{Op: "open", Path: path + ".compact", Err: syscall.EROFS}
	if c := exitCode(asFileError(erofs)); c != 2 {
		t.Errorf("exit status for %v = %d; want 2", erofs, c)
	}
}
