package position

import (
	"errors"
	"path/filepath"
	"sync"
	"testing"

	"github.com/go-logr/logr"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/watchjournal/watchjournal/journal"
)

// step is one write of a test journal: its events, then the journal's
// resourceVersion.
type step struct {
	rv  string
	evs []journal.Event
}

// writeJournal returns a new journal of ConfigMaps in wj with steps
// written, one transaction each.
func writeJournal(t *testing.T, steps []step) *journal.Journal {
	t.Helper()
	res := journal.Resource{GVR: schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}, Namespace: "wj"}
	j, err := journal.Open(filepath.Join(t.TempDir(), "j.db"), &journal.Options{Resource: &res, NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = j.Close() })
	for _, st := range steps {
		if err := j.Writer().Update(func(tx *journal.Tx) error {
			for i := range st.evs {
				if _, err := tx.Append(&st.evs[i]); err != nil {
					return err
				}
			}
			return tx.SetResourceVersion(st.rv)
		}); err != nil {
			t.Fatal(err)
		}
	}
	return j
}

// testJournal: a list (offsets 1-2, list RV 5) and two watch events
// (offset 3 rv 6, offset 4 rv 8); resourceVersion 8.
func testJournal(t *testing.T) *journal.Journal {
	t.Helper()
	return writeJournal(t, []step{
		{"5", []journal.Event{
			{Type: journal.Added, Key: "wj/a", UID: "ua", ResourceVersion: "2", Origin: journal.OriginRelist},
			{Type: journal.Added, Key: "wj/b", UID: "ub", ResourceVersion: "4", Origin: journal.OriginRelist},
		}},
		{"6", []journal.Event{{Type: journal.Modified, Key: "wj/a", UID: "ua", ResourceVersion: "6", Origin: journal.OriginWatch}}},
		{"8", []journal.Event{{Type: journal.Modified, Key: "wj/b", UID: "ub", ResourceVersion: "8", Origin: journal.OriginWatch}}},
	})
}

// A Tracker's position follows the commits forward only, and tells its
// Signal when it moved.
func TestTracker_MovesForwardOnlyAndSignals(t *testing.T) {
	j := testJournal(t)
	sig := NewSignal()
	tr := Tracker{Signal: sig}
	moved := func() bool {
		select {
		case <-sig.moved:
			return true
		default:
			return false
		}
	}
	tr.NoteCommit(j, 2) // the list only: no position
	if p := tr.Position(); p != "" || moved() {
		t.Fatalf("after committing the list: position %q (moved %v); want none", p, moved())
	}
	tr.NoteCommit(j, 3)
	if p := tr.Position(); p != "6" || !moved() {
		t.Fatalf("after committing offset 3: position %q; want 6, signalled", p)
	}
	tr.NoteCommit(j, 4) // the head: the journal's resourceVersion
	if p := tr.Position(); p != "8" || !moved() {
		t.Fatalf("after committing the head: position %q; want 8, signalled", p)
	}
	tr.Note(j, 3) // an older commit does not move it back
	if p := tr.Position(); p != "8" || moved() {
		t.Fatalf("after noting offset 3 again: position %q (moved %v); want 8, not signalled", p, moved())
	}
	if sig.commits != 3 {
		t.Errorf("commits counted %d; want 3", sig.commits)
	}
}

// A Follower commits up to what a position covers (creating its
// consumer), only forward, does not scan again for an unchanged position
// and head, and leaves a consumer whose source started alone.
func TestFollower_Step(t *testing.T) {
	j := testJournal(t)
	var mu sync.Mutex
	var started bool
	var calls int
	f := &Follower{Name: "standby", Journal: j, Mu: &mu, Started: &started, Log: logr.Discard()}
	f.commit = func(p uint64) error { calls++; return f.commitLocked(p) }
	committed := func() uint64 {
		t.Helper()
		c, err := j.Consumers().Committed("standby")
		if errors.Is(err, journal.ErrNoConsumer) {
			return 0
		}
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	f.Step("5") // no watch event at or before 5: start 1, nothing to commit
	if c := committed(); c != 0 || calls != 0 {
		t.Fatalf("Step(5): committed %d (%d calls); want 0", c, calls)
	}
	f.Step("7")
	if c := committed(); c != 3 || calls != 1 {
		t.Fatalf("Step(7): committed %d (%d calls); want 3", c, calls)
	}
	f.Step("7")
	if calls != 1 {
		t.Fatalf("Step(7) again: %d calls; want none more", calls)
	}
	f.Step("9")
	if c := committed(); c != 4 || calls != 2 {
		t.Fatalf("Step(9): committed %d (%d calls); want 4 (the head)", c, calls)
	}
	f.Step("6") // behind the commit: nothing
	if c := committed(); c != 4 || calls != 2 {
		t.Fatalf("Step(6): committed %d (%d calls); want 4", c, calls)
	}

	// The source started here: the consumer is its own from now on.
	if err := j.Consumers().Reset("standby", 0); err != nil {
		t.Fatal(err)
	}
	started = true
	f.Step("8")
	if c := committed(); c != 0 {
		t.Fatalf("Step(8) after the source started: committed %d; want 0, untouched", c)
	}
}

// standbyJournal writes, by hand, what a writer journals across a 410:
//
//	offsets 1-3   the initial list (relist, key order): a rv 5, b rv 3, c rv 9; list RV 9
//	offsets 4-5   watch: MODIFIED a rv 10, MODIFIED b rv 11
//	offsets 6-8   a relist after a 410 at list RV 15 (key order): MODIFIED a rv 14,
//	              DELETED b rv 11 (the index's, the delete was at 13), ADDED d rv 12
//	offsets 9-10  watch: MODIFIED c rv 16, MODIFIED d rv 17; resourceVersion 17
func standbyJournal(t *testing.T) *journal.Journal {
	t.Helper()
	return writeJournal(t, []step{
		{"9", []journal.Event{
			{Type: journal.Added, Key: "wj/a", UID: "ua", ResourceVersion: "5", Origin: journal.OriginRelist},
			{Type: journal.Added, Key: "wj/b", UID: "ub", ResourceVersion: "3", Origin: journal.OriginRelist},
			{Type: journal.Added, Key: "wj/c", UID: "uc", ResourceVersion: "9", Origin: journal.OriginRelist},
		}},
		{"10", []journal.Event{{Type: journal.Modified, Key: "wj/a", UID: "ua", ResourceVersion: "10", Origin: journal.OriginWatch}}},
		{"11", []journal.Event{{Type: journal.Modified, Key: "wj/b", UID: "ub", ResourceVersion: "11", Origin: journal.OriginWatch}}},
		{"15", []journal.Event{
			{Type: journal.Modified, Key: "wj/a", UID: "ua", ResourceVersion: "14", Origin: journal.OriginRelist},
			{Type: journal.Deleted, Key: "wj/b", UID: "ub", ResourceVersion: "11", Origin: journal.OriginRelist, Reason: journal.ReasonGone},
			{Type: journal.Added, Key: "wj/d", UID: "ud", ResourceVersion: "12", Origin: journal.OriginRelist},
		}},
		{"16", []journal.Event{{Type: journal.Modified, Key: "wj/c", UID: "uc", ResourceVersion: "16", Origin: journal.OriginWatch}}},
		{"17", []journal.Event{{Type: journal.Modified, Key: "wj/d", UID: "ud", ResourceVersion: "17", Origin: journal.OriginWatch}}},
	})
}

// Where a new leader starts for a published position: after the last watch
// event the position covers, replaying a relist's events whose list it
// cannot place (their RVs are not when they happened), never skipping one.
func TestStartFor(t *testing.T) {
	j := standbyJournal(t)
	for _, c := range []struct {
		pos   string
		floor uint64
		start uint64
		ok    bool
	}{
		{"17", 0, 11, true}, // the journal's resourceVersion: everything covered
		{"99", 0, 11, true},
		{"16", 0, 10, true},
		{"15", 0, 6, true}, // the relist (list RV 15) is covered, but its RV is not known: replayed
		{"13", 0, 6, true}, // DELETED b carries rv 11 (<= 13), the delete was at 13: replayed, not skipped
		{"11", 0, 6, true},
		{"10", 0, 5, true},
		{"9", 0, 1, true}, // no watch event at or before 9, the list's RV not known: the whole journal,
		{"4", 0, 1, true}, // nothing being trimmed
		{"16", 8, 10, true},
		{"16", 9, 0, false},
		{"11", 5, 0, false}, // the follower, past its commit at 5: nothing to move to
	} {
		start, why, ok, err := StartFor(j, c.pos, c.floor)
		if err != nil {
			t.Fatal(err)
		}
		if start != c.start || ok != c.ok {
			t.Errorf("StartFor(%s, floor %d) = %d, %v (%s); want %d, %v", c.pos, c.floor, start, ok, why, c.start, c.ok)
		}
	}

	if start, why, ok, err := StartFor(j, "x-not-a-number", 0); err != nil || start != 1 || !ok {
		t.Errorf("StartFor of a position no event equals = %d, %v, %v (%s); want 1 (the whole journal, nothing trimmed)", start, ok, err, why)
	}

	// Retention trimmed the list and the first watch event: a position
	// before what is left cannot be placed.
	if n, _, err := j.Writer().Trim(5, 10, 0, 0); err != nil || n != 4 {
		t.Fatalf("Trim = %d, %v", n, err)
	}
	if start, why, ok, err := StartFor(j, "10", 0); err != nil || ok {
		t.Errorf("StartFor(10) after trimming to offset 5 = %d, %v, %v; want not ok (resync)", start, ok, err)
	} else {
		t.Logf("StartFor(10) after trimming: %s", why)
	}
	if start, _, ok, err := StartFor(j, "11", 0); err != nil || !ok || start != 6 {
		t.Errorf("StartFor(11) after trimming to offset 5 = %d, %v, %v; want 6", start, ok, err)
	}
}

// Resource versions that do not compare (not what the apiserver serves,
// but opaque all the same): the position is placed after the watch event
// whose resourceVersion equals it.
func TestStartFor_ResourceVersionsThatDoNotCompare(t *testing.T) {
	j := writeJournal(t, []step{{"r-c", []journal.Event{
		{Type: journal.Added, Key: "wj/a", UID: "ua", ResourceVersion: "r-a", Origin: journal.OriginRelist},
		{Type: journal.Modified, Key: "wj/a", UID: "ua", ResourceVersion: "r-b", Origin: journal.OriginWatch},
		{Type: journal.Modified, Key: "wj/a", UID: "ua", ResourceVersion: "r-c", Origin: journal.OriginWatch},
	}}})
	for pos, want := range map[string]uint64{"r-b": 3, "r-c": 4, "r-a": 1 /* a relist event's: not placed */, "r-z": 1} {
		if start, why, ok, err := StartFor(j, pos, 0); err != nil || !ok || start != want {
			t.Errorf("StartFor(%s) = %d, %v, %v (%s); want %d", pos, start, ok, err, why, want)
		}
	}
}

// What a commit publishes: the RV of the last watch event it covers, never
// a relist event's; the journal's resourceVersion once it reaches the head.
func TestTracker_At(t *testing.T) {
	j := standbyJournal(t)
	tr := &Tracker{}
	for _, c := range []struct {
		commit uint64
		pos    string
	}{
		{2, ""}, // within the list: no position yet
		{3, ""},
		{4, "10"},
		{5, "11"},
		{6, "11"}, // MODIFIED a rv 14 of the relist: says nothing of the rest of the relist
		{7, "11"},
		{8, "11"},
		{9, "16"},
		{10, "17"}, // the head: the journal's resourceVersion
	} {
		pos, err := tr.At(j, c.commit)
		if err != nil {
			t.Fatal(err)
		}
		if pos != c.pos {
			t.Errorf("At(%d) = %q; want %q", c.commit, pos, c.pos)
		}
	}
	// From scratch (no earlier scan), far from the last watch event.
	if pos, err := (&Tracker{}).At(j, 8); err != nil || pos != "11" {
		t.Errorf("At(8) from scratch = %q, %v; want 11", pos, err)
	}
}

// Comparable tells the resourceVersions StartFor can order from those it
// places only by equality.
func TestComparable(t *testing.T) {
	for pos, want := range map[string]bool{"12345": true, "1": true, "": false, "opaque-rv": false, "0123": false} {
		if got := Comparable(pos); got != want {
			t.Errorf("Comparable(%q) = %v; want %v", pos, got, want)
		}
	}
}
