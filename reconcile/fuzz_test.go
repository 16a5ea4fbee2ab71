package reconcile

import (
	"fmt"
	"sort"
	"testing"

	"github.com/watchjournal/watchjournal/journal"
)

// Diff against a simple in-memory model: applying its events to the indexed
// state gives exactly the listed state; no event for an unchanged key; a
// new UID is always DELETED then ADDED, never MODIFIED.
func FuzzDiff(f *testing.F) {
	f.Add([]byte{0, 1, 2, 3, 4, 5, 6, 7, 8, 9})
	f.Add([]byte{255, 0, 17, 34, 51})
	f.Fuzz(func(t *testing.T, b []byte) {
		// Each byte: key (low 4 bits), side (bits 4-5), uid and rv variants.
		indexed := map[string]journal.IndexEntry{}
		listed := map[string]Item{}
		for _, x := range b {
			key := fmt.Sprintf("ns/k%02d", x&15)
			uid := fmt.Sprintf("u%d", (x>>6)&1)
			rv := fmt.Sprintf("%d", (x>>7)&1)
			switch (x >> 4) & 3 {
			case 0:
				indexed[key] = journal.IndexEntry{Key: key, UID: uid, ResourceVersion: rv}
			case 1:
				listed[key] = Item{Key: key, UID: uid, ResourceVersion: rv}
			default:
				indexed[key] = journal.IndexEntry{Key: key, UID: uid, ResourceVersion: rv}
				listed[key] = Item{Key: key, UID: uid, ResourceVersion: fmt.Sprint(x >> 6)}
			}
		}
		var ix []journal.IndexEntry
		for _, e := range indexed {
			ix = append(ix, e)
		}
		sort.Slice(ix, func(a, b int) bool { return ix[a].Key < ix[b].Key })
		var ls []Item
		for _, it := range listed {
			ls = append(ls, it)
		}
		sort.Slice(ls, func(a, b int) bool { return ls[a].Key < ls[b].Key })

		state := map[string]journal.IndexEntry{}
		for k, v := range indexed {
			state[k] = v
		}
		for _, e := range Diff(ix, ls) {
			cur, present := state[e.Key]
			switch e.Type {
			case journal.Added:
				if present {
					t.Fatalf("ADDED %s while present", e.Key)
				}
				state[e.Key] = journal.IndexEntry{Key: e.Key, UID: e.UID, ResourceVersion: e.ResourceVersion}
			case journal.Modified:
				if !present || cur.UID != e.UID || cur.ResourceVersion == e.ResourceVersion {
					t.Fatalf("MODIFIED %s: present %v, %+v -> %+v", e.Key, present, cur, e)
				}
				state[e.Key] = journal.IndexEntry{Key: e.Key, UID: e.UID, ResourceVersion: e.ResourceVersion}
			case journal.Deleted:
				if !present || cur.UID != e.UID {
					t.Fatalf("DELETED %s: present %v, uid %s vs %s", e.Key, present, cur.UID, e.UID)
				}
				delete(state, e.Key)
			}
		}
		if len(state) != len(listed) {
			t.Fatalf("state has %d keys; listed %d", len(state), len(listed))
		}
		for k, it := range listed {
			if s := state[k]; s.UID != it.UID || s.ResourceVersion != it.ResourceVersion {
				t.Fatalf("%s: state %+v; listed %+v", k, s, it)
			}
		}
	})
}
