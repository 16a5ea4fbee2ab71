package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/watchjournal/watchjournal/journal"
	"github.com/watchjournal/watchjournal/journal/inspect"
)

// payloadOf returns event i's object payload in a big journal: 8 KiB of
// one letter, distinct per event.
func payloadOf(i int) []byte { return bytes.Repeat([]byte{'a' + byte(i)}, 8<<10) }

// writeBigJournal creates a closed journal of n events of one key, ADDED
// then MODIFIED, each object about 8 KiB (payloadOf).
func writeBigJournal(t *testing.T, n int) string {
	t.Helper()
	path := filepath.Join(tempDir(t), "j.db")
	j := openJournal(t, path)
	for i := range n {
		typ := journal.Modified
		if i == 0 {
			typ = journal.Added
		}
		e := ev(typ, "wj/big", "u1", "1"+string(rune('0'+i)), i)
		e.Object = append(append([]byte(`{"metadata":{"name":"big"},"data":{"k":"`), payloadOf(i)...), `"}}`...)
		appendEvents(t, j, e.ResourceVersion, e)
	}
	if err := j.Close(); err != nil {
		t.Fatal(err)
	}
	return path
}

// damage rewrites the file at path with fn applied to its bytes.
func damage(t *testing.T, path string, fn func(b []byte)) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	fn(b)
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
}

func TestCheck_SoundFile(t *testing.T) {
	path := writeJournal(t)
	const want = `events    4
objects   1
replayed  yes
problems  none
`
	stdout, stderr, code := runCLI("verify", "--db", path)
	if code != 0 || stdout != want || stderr != "" {
		t.Errorf("verify: exit %d, stdout\n%s\nstderr %q; want 0 and\n%s", code, stdout, stderr, want)
	}
	const wantJSON = `{"events":4,"objects":1,"replayed":true,"ok":true,"problems":[]}` + "\n"
	stdout, stderr, code = runCLI("verify", "--db", path, "-o", "json")
	if code != 0 || stdout != wantJSON || stderr != "" {
		t.Errorf("verify -o json: exit %d, stdout %q, stderr %q; want 0 and %q", code, stdout, stderr, wantJSON)
	}
	// check is the command (the file check, not the relist); verify is
	// an alias of it, used above. --help lists check.
	stdout, stderr, code = runCLI("check", "--db", path)
	if code != 0 || stdout != want || stderr != "" {
		t.Errorf("check: exit %d, stdout\n%s\nstderr %q; want 0 and\n%s", code, stdout, stderr, want)
	}
	stdout, _, _ = runCLI("--help")
	if !strings.Contains(stdout, "\n  check ") || strings.Contains(stdout, "\n  verify ") {
		t.Errorf("--help lists\n%s\nwant check among the commands, verify not (it is check's alias)", stdout)
	}
	// It opened the file briefly: a writer can open it now.
	j := openJournal(t, path)
	if err := j.Close(); err != nil {
		t.Fatal(err)
	}
}

func TestCheck_TrimmedFileIsNotReplayed(t *testing.T) {
	path := writeJournal(t)
	j := openJournal(t, path)
	if _, _, err := j.Writer().Trim(3, 10, 0, 0); err != nil {
		t.Fatal(err)
	}
	j.Close()
	stdout, stderr, code := runCLI("verify", "--db", path)
	want := "events    2\nobjects   1\nreplayed  no (the journal is trimmed or damaged: its replay was not compared with the index)\nproblems  none\n"
	if code != 0 || stdout != want {
		t.Errorf("verify of a trimmed file: exit %d, stdout\n%s\nstderr %q; want 0 and\n%s", code, stdout, stderr, want)
	}
}

// Junk in the bytes of a stored record, found by its content wherever
// bbolt put it, fails that record's checksum: verify lists the problem,
// line by line, and exits 3.
func TestCheck_DamagedRecord(t *testing.T) {
	path := writeBigJournal(t, 6)
	copies := 0
	damage(t, path, func(b []byte) {
		// Every copy: a freed page may hold a stale one.
		for i, p := 0, payloadOf(2); ; copies++ {
			k := bytes.Index(b[i:], p)
			if k < 0 {
				break
			}
			copy(b[i+k+len(p)/2:], "\xde\xad\xbe\xef\xde\xad\xbe\xef")
			i += k + len(p)
		}
	})
	if copies == 0 {
		t.Fatal("event 3's payload not found in the file: the test is not testing")
	}
	stdout, stderr, code := runCLI("verify", "--db", path)
	head := "events    6\nobjects   1\nreplayed  no (the journal is trimmed or damaged: its replay was not compared with the index)\nproblems  "
	if code != 3 || !strings.HasPrefix(stdout, head) || !strings.Contains(stdout, "\n  journal: bad record: offset 3: checksum mismatch\n") {
		t.Errorf("verify: exit %d, stdout\n%s\nwant 3, a report starting\n%s\nand offset 3's checksum mismatch on a line of its own", code, stdout, head)
	}
	if want := "journalctl: verify: problems found in " + path + " ("; !strings.HasPrefix(stderr, want) || strings.Count(stderr, "\n") != 1 {
		t.Errorf("verify: stderr %q; want one line starting %q", stderr, want)
	}
	stdout, _, code = runCLI("verify", "--db", path, "-o", "json")
	if code != 3 || !strings.HasPrefix(stdout, `{"events":6,"objects":1,"replayed":false,"ok":false,"problems":["journal: bad record: offset 3: checksum mismatch"`) {
		t.Errorf("verify -o json: exit %d, stdout %s; want 3 and offset 3's checksum mismatch first", code, stdout)
	}
}

// Junk over the middle half of the file hits records and bbolt's own
// pages alike: verify reports problems (3) or refuses the file as
// corrupt (2), in one line, and does not panic.
func TestCheck_JunkOverTheMiddleHalf(t *testing.T) {
	path := writeBigJournal(t, 6)
	damage(t, path, func(b []byte) {
		for i := len(b) / 4; i < 3*len(b)/4; i++ {
			b[i] = "\xde\xad\xbe\xef"[i%4]
		}
	})
	stdout, stderr, code := runCLI("verify", "--db", path)
	switch code {
	case 3:
		if !strings.Contains(stdout, "\nproblems  ") || !strings.Contains(stderr, "problems found") {
			t.Errorf("verify: exit 3, stdout\n%s\nstderr %q; want the problems listed", stdout, stderr)
		}
	case 2:
		if stdout != "" || !strings.Contains(stderr, "corrupt") || !strings.Contains(stderr, path) || strings.Count(stderr, "\n") != 1 {
			t.Errorf("verify: exit 2, stdout %q, stderr %q; want nothing, and one line calling %s corrupt", stdout, stderr, path)
		}
	default:
		t.Errorf("verify: exit %d, stdout\n%s\nstderr %q; want 3 or 2", code, stdout, stderr)
	}
	t.Logf("exit %d: %s%s", code, stdout, stderr)
}

func TestCheck_LockedByAWriter(t *testing.T) {
	t.Run("a watch serving the file is named, and relist suggested", func(t *testing.T) {
		j := writerJournal(t)
		serveJournal(t, j, maxWait)
		stdout, stderr, code := runCLI("verify", "--db", j.Path())
		want := "stop the watch to verify the file; use `journalctl relist` to check the index against the server\n"
		if code != 2 || stdout != "" || !strings.Contains(stderr, "locked") ||
			!strings.Contains(stderr, "a watch is running on it ("+inspect.SocketPath(j.Path())+")") || !strings.HasSuffix(stderr, want) {
			t.Errorf("verify while a watch runs: exit %d, stdout %q, stderr %q; want 2 and a line ending %q", code, stdout, stderr, want)
		}
	})
	t.Run("another writer is to be stopped", func(t *testing.T) {
		j := writerJournal(t)
		_, stderr, code := runCLI("verify", "--db", j.Path())
		if code != 2 || !strings.HasSuffix(stderr, "stop the process that writes it to verify the file\n") {
			t.Errorf("verify while a writer without a socket holds the file: exit %d, stderr %q; want 2", code, stderr)
		}
	})
}
