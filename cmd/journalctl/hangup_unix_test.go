//go:build unix

package main

import (
	"bufio"
	"context"
	"os"
	"strings"
	"testing"
	"time"
)

// events -f | head -1 exits as soon as head does, on a quiet journal too:
// the follower notices that its output's reader went away, whether a
// write fails (head read one line of several) or nothing is left to write
// (the reader read everything, then closed the pipe).
func TestEvents_Follow_ReaderGone(t *testing.T) {
	conf := tuned(func(c *settings) { c.hangupPoll = 10 * time.Millisecond })
	for _, tc := range []struct {
		name string
		// until is the line after which the reader closes.
		until string
	}{
		{"head -1", "OFFSET"},
		{"the reader read every row, then closed", "4 "},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := writeJournal(t)
			r, w, err := os.Pipe()
			if err != nil {
				t.Fatal(err)
			}
			defer w.Close()
			stderr := newOutput()
			code := make(chan int, 1)
			go func() { code <- runWith(context.Background(), conf, []string{"events", "--db", path, "-f"}, w, stderr) }()

			br := bufio.NewReader(r)
			var read []string
			for {
				line, err := br.ReadString('\n')
				if err != nil {
					t.Fatal(err)
				}
				read = append(read, line)
				if strings.HasPrefix(line, tc.until) {
					break
				}
			}
			r.Close()
			select {
			case c := <-code:
				if c != 0 {
					t.Errorf("exit %d, stderr %q; want 0", c, stderr)
				}
			case <-time.After(5 * time.Second):
				t.Fatalf("events -f still runs 5 s after its reader (which read %q) closed the pipe", read)
			}
		})
	}
}
