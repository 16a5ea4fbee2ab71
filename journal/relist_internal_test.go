package journal

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
)

// stagedRelist opens a journal holding one object ("wj/old", rv 1), stages
// n ADDED events and the DELETED of wj/old, and returns both.
func stagedRelist(t *testing.T, n int) (string, *Journal, *Relist) {
	t.Helper()
	return stagedRelistWith(t, n, nil)
}

// stagedRelistWith is stagedRelist with the journal opened with o.
func stagedRelistWith(t *testing.T, n int, o *Options) (string, *Journal, *Relist) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "j.db")
	j, err := Open(path, o)
	if err != nil {
		t.Fatal(err)
	}
	appendWatch(t, j, "1", Event{Type: Added, Key: "wj/old", UID: "u0", ResourceVersion: "1"})
	rel, err := j.Writer().BeginRelist()
	if err != nil {
		t.Fatal(err)
	}
	evs := make([]Event, 0, n+1)
	for i := range n {
		evs = append(evs, Event{Type: Added, Key: fmt.Sprintf("wj/k%05d", i), UID: "u", ResourceVersion: "7", Origin: OriginRelist})
	}
	evs = append(evs, Event{Type: Deleted, Key: "wj/old", UID: "u0", ResourceVersion: "1", Origin: OriginRelist})
	if err := rel.Stage(evs); err != nil {
		t.Fatal(err)
	}
	return path, j, rel
}

func reopen(t *testing.T, path string) (*Journal, Stats) {
	t.Helper()
	j, err := Open(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = j.Close() })
	st, err := j.Stats()
	if err != nil {
		t.Fatal(err)
	}
	if r, err := j.Check(); err != nil || !r.OK() {
		t.Fatalf("Check after reopen = %+v, %v", r, err)
	}
	if _, err := os.Stat(stagePath(path)); !os.IsNotExist(err) {
		t.Fatalf("stage file after reopen: %v; want it removed", err)
	}
	return j, st
}

// A commit interrupted between the commit marker and the last chunk (the
// test stops it there and closes the file, standing in for a crash) must
// roll forward on the next Open: the relist is applied whole, never half.
func TestRelist_InterruptedCommit_RollsForwardOnOpen(t *testing.T) {
	const n = 2*commitChunk + 10
	for _, chunks := range []int{0, 1, 2} {
		t.Run(fmt.Sprintf("after %d chunks", chunks), func(t *testing.T) {
			path, j, rel := stagedRelist(t, n)
			if _, err := rel.mark("7"); err != nil {
				t.Fatal(err)
			}
			if err := j.finishRelistChunks(chunks); err != nil {
				t.Fatal(err)
			}
			_ = j.Close() // the crash

			_, st := reopen(t, path)
			if st.Objects != n || st.LastOffset != n+2 || st.ResourceVersion != "7" {
				t.Fatalf("Stats() after reopen = %+v; want %d objects, %d events, rv 7", st, n, n+2)
			}
		})
	}
}

// Staging interrupted before the marker (the file is closed with the stage
// file left behind, standing in for a crash) leaves the file as it was.
func TestRelist_InterruptedStaging_ChangesNothing(t *testing.T) {
	path, j, rel := stagedRelist(t, 10)
	if err := rel.w.w.Flush(); err != nil {
		t.Fatal(err)
	}
	_ = j.Close() // the crash; the stage file stays behind

	_, st := reopen(t, path)
	if st.Objects != 1 || st.LastOffset != 1 || st.ResourceVersion != "1" {
		t.Fatalf("Stats() after reopen = %+v; want the state before the relist", st)
	}
}

// A stage file that is gone, foreign or short when the marker needs it
// cannot roll forward: Open keeps what was moved, clears the
// resourceVersion (so that the next run relists) and never fails.
func TestRelist_LostStageFileForcesRelist(t *testing.T) {
	damage := map[string]func(p string) error{
		"missing":   os.Remove,
		"truncated": func(p string) error { return os.Truncate(p, 100) },
		"foreign": func(p string) error {
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			b[10] ^= 0xff // the nonce
			return os.WriteFile(p, b, 0o600)
		},
		"bad record": func(p string) error {
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			b[len(b)/2] ^= 0xff
			return os.WriteFile(p, b, 0o600)
		},
	}
	for name, fn := range damage {
		t.Run(name, func(t *testing.T) {
			path, j, rel := stagedRelist(t, 3*commitChunk)
			if _, err := rel.mark("7"); err != nil {
				t.Fatal(err)
			}
			if err := j.finishRelistChunks(1); err != nil {
				t.Fatal(err)
			}
			_ = j.Close()
			if err := fn(stagePath(path)); err != nil {
				t.Fatal(err)
			}

			j2, st := reopen(t, path)
			if st.ResourceVersion != "" {
				t.Fatalf("resourceVersion after a lost stage file = %q; want empty (relist)", st.ResourceVersion)
			}
			if st.LastOffset < commitChunk+1 {
				t.Fatalf("LastOffset = %d; want the first chunk kept", st.LastOffset)
			}
			// The next relist works as usual.
			next, err := j2.Writer().BeginRelist()
			if err != nil {
				t.Fatal(err)
			}
			if err := next.Stage([]Event{{Type: Added, Key: "wj/z", UID: "z", ResourceVersion: "9", Origin: OriginRelist}}); err != nil {
				t.Fatal(err)
			}
			if _, _, err := next.Commit("9"); err != nil {
				t.Fatal(err)
			}
			if rv, _ := j2.ResourceVersion(); rv != "9" {
				t.Fatalf("resourceVersion after the next relist = %q; want 9", rv)
			}
		})
	}
}

// A commit that failed after its marker is finished by the next
// BeginRelist, before anything new is staged.
func TestRelist_BeginFinishesPendingCommit(t *testing.T) {
	const n = 2 * commitChunk
	_, j, rel := stagedRelist(t, n)
	defer j.Close()
	if _, err := rel.mark("7"); err != nil {
		t.Fatal(err)
	}
	if err := j.finishRelistChunks(1); err != nil { // then the disk filled up
		t.Fatal(err)
	}
	if _, err := j.Writer().BeginRelist(); err != nil {
		t.Fatal(err)
	}
	st, _ := j.Stats()
	if st.Objects != n || st.ResourceVersion != "7" {
		t.Fatalf("Stats() after BeginRelist = %+v; want the pending relist finished", st)
	}
}

// A first list's Stage of more than directChunk ADDEDs commits them in
// several transactions, each visible at once, with their offsets in order
// and the stored resourceVersion cleared until Commit.
func TestRelist_DirectChunks(t *testing.T) {
	const n = 2*directChunk + 10
	path := filepath.Join(t.TempDir(), "j.db")
	chunks := 0
	var o Options
	o.hooks.afterDirectChunk = func() { chunks++ }
	j, err := Open(path, &o)
	if err != nil {
		t.Fatal(err)
	}
	defer j.Close()
	r, err := j.Writer().BeginRelist()
	if err != nil {
		t.Fatal(err)
	}
	evs := make([]Event, 0, n)
	for i := range n {
		evs = append(evs, Event{Type: Added, Key: fmt.Sprintf("wj/k%05d", i), UID: "u", ResourceVersion: "7", Origin: OriginRelist})
	}
	if err := r.Stage(evs); err != nil {
		t.Fatal(err)
	}
	if chunks != 3 {
		t.Errorf("Stage of %d ADDEDs committed %d transactions; want 3 (directChunk %d)", n, chunks, directChunk)
	}
	for i, e := range evs {
		if e.Offset != uint64(i+1) {
			t.Fatalf("event %d: offset %d; want %d", i, e.Offset, i+1)
		}
	}
	if st, err := j.Stats(); err != nil || st.LastOffset != n || st.Objects != n || st.ResourceVersion != "" {
		t.Fatalf("after Stage: %+v, %v; want head %d, %d keys, no resourceVersion", st, err, n, n)
	}
	if _, _, err := r.Commit("8"); err != nil {
		t.Fatal(err)
	}
	if st, err := j.Stats(); err != nil || st.LastOffset != n || st.ResourceVersion != "8" {
		t.Fatalf("after Commit: %+v, %v; want head %d, resourceVersion 8", st, err, n)
	}
}
