//go:build unix

package main

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/watchjournal/watchjournal/journal"
)

// pipeBacklog is how many events the journal of TestEvents_ReaderGone_Exit0
// holds: their rows (about 2.5 MB of events, 1 MB of index entries)
// overflow a pipe's buffer (64 KiB on Linux unless a program enlarges it),
// so the reader closes the pipe while journalctl is still printing them.
const pipeBacklog = 20000

// Ensure events | head -1, events -f | head -1 and index | head -1 exit 0,
// quietly, when the reader closes the pipe while the backlog is being
// printed: the process (this test binary running main, as the built
// journalctl) does not die of SIGPIPE (exit 141 in a shell), and says
// nothing on stderr.
func TestEvents_ReaderGone_Exit0(t *testing.T) {
	path := filepath.Join(tempDir(t), "j.db")
	j, err := journal.Open(path, &journal.Options{Resource: &testResource, NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	evs := make([]journal.Event, pipeBacklog)
	for i := range evs {
		evs[i] = ev(journal.Added, fmt.Sprintf("wj/cm%05d", i), fmt.Sprintf("u%05d", i), "1", i)
	}
	appendEvents(t, j, "1", evs...)
	if err := j.Close(); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		args []string
	}{
		{"events | head -1", []string{"events", "--db", path}},
		{"events -f | head -1", []string{"events", "--db", path, "-f"}},
		{"events -o json | head -1", []string{"events", "--db", path, "-o", "json"}},
		{"index | head -1", []string{"index", "--db", path}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r, w, err := os.Pipe()
			if err != nil {
				t.Fatal(err)
			}
			var stderr bytes.Buffer
			cmd := exec.Command(os.Args[0], tc.args...)
			cmd.Env = append(os.Environ(), shardChildEnv+"=1")
			cmd.Stdout, cmd.Stderr = w, &stderr
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			w.Close() // the child holds the write end now
			done := make(chan error, 1)
			go func() { done <- cmd.Wait() }()
			t.Cleanup(func() { _ = cmd.Process.Kill() })

			line, err := bufio.NewReader(r).ReadString('\n') // head -1
			if err != nil {
				t.Fatalf("reading the first line: %v (got %q)", err, line)
			}
			r.Close()
			select {
			case err := <-done:
				var ee *exec.ExitError
				switch {
				case errors.As(err, &ee):
					t.Errorf("%s: %v (exit code %d); want exit 0; stderr %q", tc.name, err, ee.ExitCode(), stderr.String())
				case err != nil:
					t.Fatal(err)
				case stderr.Len() > 0:
					t.Errorf("%s: exit 0 with stderr %q; want nothing on stderr", tc.name, stderr.String())
				}
			case <-time.After(time.Minute):
				t.Fatalf("%s: still running a minute after its reader went away; stderr %q", tc.name, stderr.String())
			}
		})
	}
}
