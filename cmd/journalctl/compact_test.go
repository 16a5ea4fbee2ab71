package main

import (
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/watchjournal/watchjournal/journal"
	"github.com/watchjournal/watchjournal/journal/bolt"
	"github.com/watchjournal/watchjournal/journal/inspect"
)

// writeTrimmedJournal creates a closed journal of 2000 events of about
// 1 KiB each, trimmed to the last 10, with consumer tail at 1995 and a
// retention recorded, and returns its path.
func writeTrimmedJournal(t *testing.T) string {
	t.Helper()
	path := filepath.Join(tempDir(t), "j.db")
	j := openJournal(t, path)
	payload := `{"data":"` + strings.Repeat("x", 1000) + `"}`
	for batch := range 20 {
		evs := make([]journal.Event, 100)
		for i := range evs {
			n := batch*100 + i
			typ := journal.Modified
			if n < 50 {
				typ = journal.Added
			}
			evs[i] = ev(typ, fmt.Sprintf("wj/o%02d", n%50), fmt.Sprintf("u%02d", n%50), strconv.Itoa(100+n), 0)
			evs[i].Object = []byte(payload)
		}
		appendEvents(t, j, strconv.Itoa(100+batch*100+99), evs...)
	}
	if _, _, err := j.Writer().Trim(1991, 5000, 0, 0); err != nil {
		t.Fatal(err)
	}
	commit(t, j, "tail", 1995)
	if err := j.Settings().SetRetention(journal.Retention{MaxEvents: 10}); err != nil {
		t.Fatal(err)
	}
	if err := j.Close(); err != nil {
		t.Fatal(err)
	}
	return path
}

// content is what a journal file holds, its size aside.
type content struct {
	Stats     journal.Stats
	Events    []journal.Event
	Consumers []journal.ConsumerInfo
	Retention journal.Retention
}

// readContent reads the journal file at path.
func readContent(t *testing.T, path string) content {
	t.Helper()
	j, err := journal.Open(path, &journal.Options{ReadOnly: true, Timeout: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer j.Close()
	var c content
	if c.Stats, err = j.Stats(); err != nil {
		t.Fatal(err)
	}
	c.Stats.FileSize = 0
	if c.Events, err = j.Read(0, 100000); err != nil {
		t.Fatal(err)
	}
	if c.Consumers, err = j.Consumers().List(); err != nil {
		t.Fatal(err)
	}
	if c.Retention, err = j.Settings().Retention(); err != nil {
		t.Fatal(err)
	}
	return c
}

func fileSize(t *testing.T, path string) int64 {
	t.Helper()
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	return fi.Size()
}

var compactedLine = regexp.MustCompile(`^rewrote (.+): (\d+) bytes -> (\d+) bytes \((\d+)% smaller\)\n$`)

func TestCompact(t *testing.T) {
	for _, keepBackup := range []bool{false, true} {
		t.Run(fmt.Sprintf("keep backup %v", keepBackup), func(t *testing.T) {
			path := writeTrimmedJournal(t)
			want, size := readContent(t, path), fileSize(t, path)
			args := []string{"compact", "--db", path}
			if keepBackup {
				args = append(args, "--keep-backup")
			}
			stdout, stderr, code := runCLI(args...)
			m := compactedLine.FindStringSubmatch(stdout)
			if code != 0 || m == nil || m[1] != path || m[2] != strconv.FormatInt(size, 10) {
				t.Fatalf("compact: exit %d, stdout %q, stderr %q; want 0 and %q", code, stdout, stderr,
					fmt.Sprintf("rewrote %s: %d bytes -> Y bytes (Z%% smaller)", path, size))
			}
			after := fileSize(t, path)
			if m[3] != strconv.FormatInt(after, 10) || after > size/4 {
				t.Errorf("compact: %s -> %s bytes, file now %d bytes; want it under a quarter of %d", m[2], m[3], after, size)
			}
			if pct := strconv.FormatInt((size-after)*100/size, 10); m[4] != pct {
				t.Errorf("compact said %s%% smaller; want %s%%", m[4], pct)
			}
			if got := readContent(t, path); !reflect.DeepEqual(got, want) {
				t.Errorf("compacted file holds\n%+v\nwant\n%+v", got, want)
			}
			if _, err := os.Stat(path + ".compact"); !os.IsNotExist(err) {
				t.Errorf("%s.compact after compact: %v; want it gone", path, err)
			}
			_, err := os.Stat(path + ".bak")
			switch {
			case keepBackup && err != nil:
				t.Errorf("backup: %v", err)
			case keepBackup:
				if got := readContent(t, path+".bak"); fileSize(t, path+".bak") != size || !reflect.DeepEqual(got, want) {
					t.Errorf("backup holds %d bytes\n%+v\nwant the old file, %d bytes\n%+v", fileSize(t, path+".bak"), got, size, want)
				}
			case !os.IsNotExist(err):
				t.Errorf("%s.bak without --keep-backup: %v; want none", path, err)
			}
		})
	}
}

// A FILE.compact left by a killed compact is replaced.
func TestCompact_StaleOutput(t *testing.T) {
	path := writeTrimmedJournal(t)
	if err := os.WriteFile(path+".compact", []byte("torn"), 0o600); err != nil {
		t.Fatal(err)
	}
	want := readContent(t, path)
	if stdout, stderr, code := runCLI("compact", "--db", path); code != 0 || !compactedLine.MatchString(stdout) {
		t.Fatalf("compact over a stale FILE.compact: exit %d, stdout %q, stderr %q; want 0", code, stdout, stderr)
	}
	if got := readContent(t, path); !reflect.DeepEqual(got, want) {
		t.Errorf("compacted file holds\n%+v\nwant\n%+v", got, want)
	}
}

func TestCompact_WhileAWriterHoldsTheFile(t *testing.T) {
	path := writeTrimmedJournal(t)
	size := fileSize(t, path)
	j := openJournal(t, path)

	_, stderr, code := runCLI("compact", "--db", path)
	if code != 2 || !strings.Contains(stderr, "locked") || !strings.Contains(stderr, "stop the process that writes it") {
		t.Errorf("compact while a writer holds the file: exit %d, stderr %q; want 2 and a clear line", code, stderr)
	}
	serveJournal(t, j, maxWait)
	_, stderr, code = runCLI("compact", "--db", path)
	if want := "a watch is running on it (" + inspect.SocketPath(path) + "); stop it to rewrite the file"; code != 2 || !strings.Contains(stderr, want) {
		t.Errorf("compact while a watch runs: exit %d, stderr %q; want 2 and %q", code, stderr, want)
	}
	if _, err := os.Stat(path + ".compact"); !os.IsNotExist(err) {
		t.Errorf("%s.compact after a refused compact: %v; want none", path, err)
	}
	if got := fileSize(t, path); got != size {
		t.Errorf("file size after a refused compact = %d; want %d", got, size)
	}
}

func TestShrinkage(t *testing.T) {
	for _, tc := range []struct {
		before, after int64
		want          string
	}{
		{1000, 250, "75% smaller"},
		{1000, 1000, "0% smaller"},
		{1000, 1500, "50% larger"},
		{0, 0, "0% smaller"},
	} {
		if got := shrinkage(tc.before, tc.after); got != tc.want {
			t.Errorf("shrinkage(%d, %d) = %q; want %q", tc.before, tc.after, got, tc.want)
		}
	}
}

// A writer that is reopening its file (journal/bolt/refresh.go) holds only
// its own lock, <path>.lock, not bbolt's: compact must be refused then too,
// or the writer goes on in the file the rename replaces.
func TestCompact_InAWritersReopen(t *testing.T) {
	path := writeTrimmedJournal(t)
	size := fileSize(t, path)
	release, err := bolt.LockWriter(path, 0) // the writer's lock, no bbolt handle: the reopen's gap
	if err != nil {
		t.Fatal(err)
	}
	defer release()

	_, stderr, code := runCLI("compact", "--db", path)
	if code != 2 || !strings.Contains(stderr, "locked") || !strings.Contains(stderr, "stop the process that writes it") {
		t.Errorf("compact in a writer's reopen: exit %d, stderr %q; want 2 and a clear line", code, stderr)
	}
	if got := fileSize(t, path); got != size {
		t.Errorf("file size after a refused compact = %d; want %d", got, size)
	}
	release()
	if _, stderr, code := runCLI("compact", "--db", path); code != 0 {
		t.Errorf("compact once the writer is gone: exit %d, stderr %q; want 0", code, stderr)
	}
	if _, err := os.Stat(path + ".lock"); !os.IsNotExist(err) {
		t.Errorf("%s.lock after compact: %v; want it removed", path, err)
	}
}
