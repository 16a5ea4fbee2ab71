package main

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/watchjournal/watchjournal/journal"
	"github.com/watchjournal/watchjournal/journal/inspect"
)

// waitUntil polls cond until it holds; it fails the test after 5 s with
// cond's last description of what it saw.
func waitUntil(t *testing.T, cond func() (bool, string)) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		ok, saw := cond()
		if ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("waited 5 s: %s", saw)
		}
		time.Sleep(time.Millisecond)
	}
}

// storedRetention reads the retention the closed file at path records.
func storedRetention(t *testing.T, path string) journal.Retention {
	t.Helper()
	j, err := journal.Open(path, &journal.Options{ReadOnly: true, Timeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer j.Close()
	r, err := j.Settings().Retention()
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// A watch against the fake apiserver resumes the test journal (RV 12) and
// then watches quietly: what changes in the file is retention's doing. The
// test events date from t0, so a MaxAge must reach back that far.
func TestWatch_Retention(t *testing.T) {
	srv := fakeAPIServer(t)
	for _, tc := range []struct {
		name   string
		stored journal.Retention // recorded in the file before the watch
		flags  []string
		want   journal.Retention // recorded after, and enforced
		line   string            // stats' retention line
		first  uint64            // first offset once enforced
	}{
		{
			name:  "flags are recorded and enforced",
			flags: []string{"--retain-events", "1", "--retain-bytes", "64Mi", "--retain-age", "87600h", "--retain-hard-bytes", "1073741824"},
			want:  journal.Retention{MaxEvents: 1, MaxBytes: 64 << 20, MaxAge: 87600 * time.Hour, HardMaxBytes: 1 << 30},
			line:  "events 1, bytes 64Mi, age 87600h0m0s, hard bytes 1Gi",
			first: 4,
		},
		{
			name:   "without flags the recorded retention is enforced",
			stored: journal.Retention{MaxEvents: 2},
			want:   journal.Retention{MaxEvents: 2},
			line:   "events 2",
			first:  3,
		},
		{
			name:   "flags replace the recorded retention, unset ones meaning no limit",
			stored: journal.Retention{MaxEvents: 2, MaxAge: time.Hour},
			flags:  []string{"--retain-events", "3"},
			want:   journal.Retention{MaxEvents: 3},
			line:   "events 3",
			first:  2,
		},
		{
			name:   "--retain-events 0 removes the recorded retention",
			stored: journal.Retention{MaxEvents: 2},
			flags:  []string{"--retain-events", "0"},
			line:   "none",
			first:  1,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := tempDir(t)
			kubeconfig, db := writeKubeconfig(t, dir, srv.URL), filepath.Join(dir, "cm.db")
			j := openJournal(t, db)
			appendEvents(t, j, "12", testEvents()...)
			if err := j.Settings().SetRetention(tc.stored); err != nil {
				t.Fatal(err)
			}
			j.Close()

			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			args := append([]string{"watch", "cm", "--db", db, "--kubeconfig", kubeconfig}, tc.flags...)
			_, stderr, code := startCLI(ctx, args...)
			stderr.waitFor(t, "watching")

			s := inspect.NewClient(inspect.SocketPath(db))
			// The window retention leaves: tc.first to 4 for the test
			// events, ending at the head. Once the resume is proven the
			// restart's verify (reconcile/verify.go) lists, and the fake
			// server's list differs from the test journal: on a slow
			// start its event can come before retention is seen, moving
			// the window by one without changing its size.
			window := 4 - tc.first // head − first
			waitUntil(t, func() (bool, string) {
				st, err := s.Stats(ctx)
				want := tc.first
				if tc.want.MaxEvents > 0 && st.LastOffset > 4 {
					want = st.LastOffset - window
				}
				return err == nil && st.LastOffset >= 4 && st.FirstOffset == want,
					fmt.Sprintf("stats through the socket: offsets %d to %d, %v; want %d to 4 (or the same window ending at the head)", st.FirstOffset, st.LastOffset, err, tc.first)
			})
			stdout, _, c := runCLI("stats", "--db", db)
			if want := "retention        " + tc.line + "\n"; c != 0 || !strings.Contains(stdout, want) {
				t.Errorf("stats through the socket: exit %d, stdout\n%s\nwant %q", c, stdout, want)
			}

			cancel()
			if c := exitStatus(t, code); c != 0 {
				t.Fatalf("watch exit %d after interrupt; want 0; stderr:\n%s", c, stderr)
			}
			if got := storedRetention(t, db); got != tc.want {
				t.Errorf("retention recorded after the watch = %+v; want %+v", got, tc.want)
			}
		})
	}
}
