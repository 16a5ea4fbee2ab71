package reconcile

import (
	"fmt"
	"strings"
	"testing"

	"github.com/watchjournal/watchjournal/internal/hashrange"
	"github.com/watchjournal/watchjournal/journal"
)

// A takeover list's ADDED, against what the previous owner held (shard.go).
func TestInheritStage(t *testing.T) {
	inh := &Inheritance{Range: hashrange.Full().Selector(), Entries: []journal.IndexEntry{
		{Key: "ns/a", UID: "ua", ResourceVersion: "10"},
		{Key: "ns/b", UID: "ub", ResourceVersion: "11"},
		{Key: "ns/c", UID: "uc", ResourceVersion: "12"},
	}}
	added := func(key, uid, rv string) journal.Event {
		return journal.Event{Type: journal.Added, Key: key, UID: uid, ResourceVersion: rv}
	}
	str := func(evs []journal.Event) string {
		var s []string
		for _, e := range evs {
			s = append(s, fmt.Sprintf("%s %s %s@%s(%s)<%s", e.Type, e.Key, e.UID, e.ResourceVersion, e.Reason, e.PrevResourceVersion))
		}
		return strings.Join(s, "; ")
	}
	for _, tc := range []struct {
		name string
		in   []journal.Event
		want string
	}{
		{"held as listed: moved in", []journal.Event{added("ns/a", "ua", "10")},
			"ADDED ns/a ua@10(moved)<"},
		{"held at another resourceVersion: MODIFIED", []journal.Event{added("ns/b", "ub", "20")},
			"MODIFIED ns/b ub@20()<11"},
		{"held with another UID: the old one gone, the new one ADDED", []journal.Event{added("ns/a", "ua", "10"), added("ns/c", "uc2", "21")},
			"ADDED ns/a ua@10(moved)<; DELETED ns/c uc@12(gone)<; ADDED ns/c uc2@21()<"},
		{"not held: ADDED as it is", []journal.Event{added("ns/d", "ud", "22")},
			"ADDED ns/d ud@22()<"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l := &Loop{inherit: &inheritState{Inheritance: inh, seen: make([]bool, len(inh.Entries))}}
			if got := str(l.inheritStage(tc.in)); got != tc.want {
				t.Errorf("inheritStage = %s; want %s", got, tc.want)
			}
		})
	}
}
