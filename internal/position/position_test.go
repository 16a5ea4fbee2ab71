package position

import (
	"path/filepath"
	"testing"

	"github.com/go-logr/logr"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/watchjournal/watchjournal/internal/journalwrite"
	"github.com/watchjournal/watchjournal/journal"
)

// testJournal: a list (offsets 1-2, list RV 5) and two watch events
// (offset 3 rv 6, offset 4 rv 8); resourceVersion 8.
func testJournal(t *testing.T) *journal.Journal {
	t.Helper()
	res := journal.Resource{GVR: schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}, Namespace: "wj"}
	j, err := journal.Open(filepath.Join(t.TempDir(), "j.db"), &journal.Options{Resource: &res, NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = j.Close() })
	steps := []struct {
		rv  string
		evs []journal.Event
	}{
		{"5", []journal.Event{
			{Type: journal.Added, Key: "wj/a", UID: "ua", ResourceVersion: "2", Origin: journal.OriginRelist},
			{Type: journal.Added, Key: "wj/b", UID: "ub", ResourceVersion: "4", Origin: journal.OriginRelist},
		}},
		{"6", []journal.Event{{Type: journal.Modified, Key: "wj/a", UID: "ua", ResourceVersion: "6", Origin: journal.OriginWatch}}},
		{"8", []journal.Event{{Type: journal.Modified, Key: "wj/b", UID: "ub", ResourceVersion: "8", Origin: journal.OriginWatch}}},
	}
	for _, st := range steps {
		if err := journalwrite.Of(j).Update(func(tx journalwrite.Tx) error {
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

// A Follower commits up to what a position covers, only forward, and
// does not scan again for an unchanged position and head.
func TestFollower_Step(t *testing.T) {
	j := testJournal(t)
	var committed uint64
	var calls int
	f := &Follower{Journal: j, Log: logr.Discard(),
		Committed: func() (uint64, error) { return committed, nil },
		Commit:    func(p uint64) error { calls++; committed = p; return nil }}
	f.Step("5") // no watch event at or before 5: start 1, nothing to commit
	if committed != 0 || calls != 0 {
		t.Fatalf("Step(5): committed %d (%d calls); want 0", committed, calls)
	}
	f.Step("7")
	if committed != 3 || calls != 1 {
		t.Fatalf("Step(7): committed %d (%d calls); want 3", committed, calls)
	}
	f.Step("7")
	if calls != 1 {
		t.Fatalf("Step(7) again: %d calls; want none more", calls)
	}
	f.Step("9")
	if committed != 4 || calls != 2 {
		t.Fatalf("Step(9): committed %d (%d calls); want 4 (the head)", committed, calls)
	}
	f.Step("6") // behind the commit: nothing
	if committed != 4 || calls != 2 {
		t.Fatalf("Step(6): committed %d (%d calls); want 4", committed, calls)
	}
}
