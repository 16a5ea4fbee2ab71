package crsource

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/watchjournal/watchjournal/internal/journalwrite"
	"github.com/watchjournal/watchjournal/journal"
)

// standbyJournal writes, by hand, what a writer journals across a 410:
//
//	offsets 1-3   the initial list (relist, key order): a rv 5, b rv 3, c rv 9; list RV 9
//	offsets 4-5   watch: MODIFIED a rv 10, MODIFIED b rv 11
//	offsets 6-8   a relist after a 410 at list RV 15 (key order): MODIFIED a rv 14,
//	              DELETED b rv 11 (the index's, the delete was at 13), ADDED d rv 12
//	offsets 9-10  watch: MODIFIED c rv 16, MODIFIED d rv 17; resourceVersion 17
func standbyJournal(t *testing.T) *journal.Journal {
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
		start, why, ok, err := startFor(j, c.pos, c.floor)
		if err != nil {
			t.Fatal(err)
		}
		if start != c.start || ok != c.ok {
			t.Errorf("startFor(%s, floor %d) = %d, %v (%s); want %d, %v", c.pos, c.floor, start, ok, why, c.start, c.ok)
		}
	}

	if start, why, ok, err := startFor(j, "x-not-a-number", 0); err != nil || start != 1 || !ok {
		t.Errorf("startFor of a position no event equals = %d, %v, %v (%s); want 1 (the whole journal, nothing trimmed)", start, ok, err, why)
	}

	// Retention trimmed the list and the first watch event: a position
	// before what is left cannot be placed.
	if n, _, err := journalwrite.Of(j).Trim(5, 10, 0); err != nil || n != 4 {
		t.Fatalf("Trim = %d, %v", n, err)
	}
	if start, why, ok, err := startFor(j, "10", 0); err != nil || ok {
		t.Errorf("startFor(10) after trimming to offset 5 = %d, %v, %v; want not ok (resync)", start, ok, err)
	} else {
		t.Logf("startFor(10) after trimming: %s", why)
	}
	if start, _, ok, err := startFor(j, "11", 0); err != nil || !ok || start != 6 {
		t.Errorf("startFor(11) after trimming to offset 5 = %d, %v, %v; want 6", start, ok, err)
	}
}

// Resource versions that do not compare (not what the apiserver serves,
// but opaque all the same): the position is placed after the watch event
// whose resourceVersion equals it.
func TestStartFor_ResourceVersionsThatDoNotCompare(t *testing.T) {
	res := journal.Resource{GVR: schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}, Namespace: "wj"}
	j, err := journal.Open(filepath.Join(t.TempDir(), "j.db"), &journal.Options{Resource: &res, NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	defer j.Close()
	evs := []journal.Event{
		{Type: journal.Added, Key: "wj/a", UID: "ua", ResourceVersion: "r-a", Origin: journal.OriginRelist},
		{Type: journal.Modified, Key: "wj/a", UID: "ua", ResourceVersion: "r-b", Origin: journal.OriginWatch},
		{Type: journal.Modified, Key: "wj/a", UID: "ua", ResourceVersion: "r-c", Origin: journal.OriginWatch},
	}
	if err := journalwrite.Of(j).Update(func(tx journalwrite.Tx) error {
		for i := range evs {
			if _, err := tx.Append(&evs[i]); err != nil {
				return err
			}
		}
		return tx.SetResourceVersion("r-c")
	}); err != nil {
		t.Fatal(err)
	}
	for pos, want := range map[string]uint64{"r-b": 3, "r-c": 4, "r-a": 1 /* a relist event's: not placed */, "r-z": 1} {
		if start, why, ok, err := startFor(j, pos, 0); err != nil || !ok || start != want {
			t.Errorf("startFor(%s) = %d, %v, %v (%s); want %d", pos, start, ok, err, why, want)
		}
	}
}

// What a commit publishes: the RV of the last watch event it covers, never
// a relist event's; the journal's resourceVersion once it reaches the head.
func TestPositionAt(t *testing.T) {
	j := standbyJournal(t)
	sb := &standby{}
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
		pos, err := sb.positionAt(j, c.commit)
		if err != nil {
			t.Fatal(err)
		}
		if pos != c.pos {
			t.Errorf("positionAt(%d) = %q; want %q", c.commit, pos, c.pos)
		}
	}
	// From scratch (no earlier scan), far from the last watch event.
	if pos, err := (&standby{}).positionAt(j, 8); err != nil || pos != "11" {
		t.Errorf("positionAt(8) from scratch = %q, %v; want 11", pos, err)
	}
}

// A source with Options.Standby whose AddToManager was never called
// refuses to start, naming the call, instead of running as a cold standby
// that never publishes.
func TestStandby_NotAdded(t *testing.T) {
	res := journal.Resource{GVR: schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}, Namespace: "wj"}
	src, err := New(&rest.Config{Host: "https://127.0.0.1:1"}, Options{Path: filepath.Join(t.TempDir(), "j.db"), Resource: res, NoSync: true,
		Standby: &Standby{Namespace: "wj"}})
	if err != nil {
		t.Fatal(err)
	}
	q := workqueue.NewTypedRateLimitingQueue(workqueue.DefaultTypedControllerRateLimiter[reconcile.Request]())
	defer q.ShutDown()
	if err := src.Start(context.Background(), q); !errors.Is(err, ErrStandbyNotAdded) || !strings.Contains(err.Error(), "src.AddToManager(mgr)") {
		t.Fatalf("Start = %v; want ErrStandbyNotAdded naming src.AddToManager(mgr)", err)
	}
	if err := src.Close(); err != nil {
		t.Fatalf("Close of a source that did not start = %v", err)
	}
	if _, err := New(&rest.Config{Host: "https://127.0.0.1:1"}, Options{Path: filepath.Join(t.TempDir(), "k.db"), Resource: res,
		Standby: &Standby{}}); err == nil || !strings.Contains(err.Error(), "Namespace") {
		t.Errorf("New with Standby.Namespace empty = %v; want an error naming Namespace", err)
	}
}
