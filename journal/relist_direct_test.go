package journal_test

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/watchjournal/watchjournal/journal"
)

// The first list into an empty index (*journal.Relist, direct mode) commits
// its ADDEDs as they are staged, writes no stage file, and clears the
// stored resourceVersion; aborted, it keeps them with no resourceVersion,
// and the next relist stages and diffs as any relist: every key once, the
// index equal to the last list.
func TestRelist_FirstListIntoEmptyIndex_CommitsAsItGoes(t *testing.T) {
	path := filepath.Join(t.TempDir(), "j.db")
	j := open(t, path)
	// An empty collection that once synced: a resourceVersion, no keys.
	appendEvents(t, j, "5")

	added := func(from, to int, rv string) []journal.Event {
		var evs []journal.Event
		for i := from; i < to; i++ {
			e := ev(journal.Added, fmt.Sprintf("wj/k%04d", i), fmt.Sprintf("u%d", i), rv)
			e.Origin = journal.OriginRelist
			evs = append(evs, e)
		}
		return evs
	}
	rel, err := j.Writer().BeginRelist()
	if err != nil {
		t.Fatal(err)
	}
	// 600 in one call (one transaction; TestRelist_DirectChunks takes more).
	if err := rel.Stage(added(0, 600, "6")); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(path + ".relist"); !os.IsNotExist(err) {
		t.Errorf("stage file during a first list: %v; want none", err)
	}
	st, err := j.Stats()
	if err != nil {
		t.Fatal(err)
	}
	if st.LastOffset != 600 || st.Objects != 600 || st.ResourceVersion != "" {
		t.Errorf("before Commit: head %d, %d keys, resourceVersion %q; want 600, 600, none (committed as staged, resourceVersion cleared)",
			st.LastOffset, st.Objects, st.ResourceVersion)
	}
	if err := rel.Abort(); err != nil {
		t.Fatal(err)
	}

	// The next list is a relist: k0000..k0299 unchanged, k0300..k0599 gone,
	// k0600..k0699 new. Nothing of it shows before Commit.
	rel, err = j.Writer().BeginRelist()
	if err != nil {
		t.Fatal(err)
	}
	var evs []journal.Event
	for i := 300; i < 600; i++ {
		e := ev(journal.Deleted, fmt.Sprintf("wj/k%04d", i), fmt.Sprintf("u%d", i), "6")
		e.Origin, e.Object, e.Reason = journal.OriginRelist, nil, journal.ReasonGone
		evs = append(evs, e)
	}
	evs = append(evs, added(600, 700, "7")...)
	if err := rel.Stage(evs); err != nil {
		t.Fatal(err)
	}
	if h, _ := j.Head(); h != 600 {
		t.Errorf("head before the relist's Commit = %d; want 600", h)
	}
	first, last, err := rel.Commit("8")
	if err != nil {
		t.Fatal(err)
	}
	if first != 601 || last != 1000 {
		t.Errorf("Commit = %d..%d; want 601..1000", first, last)
	}
	_ = j.Close()
	j = open(t, path)
	st, err = j.Stats()
	if err != nil {
		t.Fatal(err)
	}
	if st.Objects != 400 || st.ResourceVersion != "8" {
		t.Errorf("after the relist: %d keys, resourceVersion %q; want 400, 8", st.Objects, st.ResourceVersion)
	}
	if r, err := j.Check(); err != nil || !r.OK() {
		t.Errorf("Check = %+v, %v", r, err)
	}

	// A first list that meets anything but an ADDED stages from there on:
	// the call that holds it shows nothing before Commit.
	path2 := filepath.Join(t.TempDir(), "j2.db")
	j2 := open(t, path2)
	rel, err = j2.Writer().BeginRelist()
	if err != nil {
		t.Fatal(err)
	}
	if err := rel.Stage(added(0, 10, "3")); err != nil {
		t.Fatal(err)
	}
	mixed := append(added(10, 20, "3"), journal.Event{Type: journal.Deleted, Key: "wj/k0000", UID: "u0", ResourceVersion: "3", Origin: journal.OriginRelist, Reason: journal.ReasonGone})
	if err := rel.Stage(mixed); err != nil {
		t.Fatal(err)
	}
	if h, _ := j2.Head(); h != 10 {
		t.Errorf("head after a staged call = %d; want 10", h)
	}
	if first, last, err := rel.Commit("4"); err != nil || first != 1 || last != 21 {
		t.Errorf("Commit = %d..%d, %v; want 1..21", first, last, err)
	}
}
