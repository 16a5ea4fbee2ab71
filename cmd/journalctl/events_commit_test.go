package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/watchjournal/watchjournal/journal"
)

// brokenOutput accepts lines whole lines, then a few bytes of the next one,
// then fails every write, as a closed pipe or a full disk does.
type brokenOutput struct {
	lines, extra int
	buf          bytes.Buffer
}

func (w *brokenOutput) Write(p []byte) (int, error) {
	for i, b := range p {
		if w.lines == 0 {
			if w.extra == 0 {
				return i, errors.New("write: broken pipe")
			}
			w.extra--
		}
		if b == '\n' {
			w.lines--
		}
		w.buf.WriteByte(b)
	}
	return len(p), nil
}

// Ensure that events --consumer --commit commits exactly the rows that
// reached the output whole, when a write fails after k rows: never a row
// not printed, and none that was.
func TestEvents_Consumer_Commit_OnlyWhatReachedTheOutput(t *testing.T) {
	const n, k = 30, 9
	for _, format := range []string{"table", "json"} {
		t.Run(format, func(t *testing.T) {
			path := filepath.Join(tempDir(t), "j.db")
			j := openJournal(t, path)
			evs := make([]journal.Event, n)
			for i := range evs {
				evs[i] = ev(journal.Added, fmt.Sprintf("wj/o%02d", i), "u", fmt.Sprint(10+i), i)
			}
			appendEvents(t, j, "99", evs...)
			commit(t, j, "c", 0)
			if err := j.Close(); err != nil {
				t.Fatal(err)
			}

			out := &brokenOutput{lines: k, extra: 5}
			out.lines++ // the table's header, or the JSON array's "["
			var stderr bytes.Buffer
			code := run(context.Background(), []string{"events", "--db", path, "--consumer", "c", "--commit", "-o", format}, out, &stderr)
			if code == 0 || !strings.Contains(stderr.String(), "broken pipe") {
				t.Errorf("events into an output that breaks: exit %d, stderr %q; want the write error", code, stderr.String())
			}
			j = openJournal(t, path)
			if got := committed(t, j, "c"); got != k {
				t.Errorf("committed after %d whole rows reached the output = %d; want %d (output %q)", k, got, k, out.buf.String())
			}
		})
	}
}
