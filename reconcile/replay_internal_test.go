package reconcile

import (
	"testing"

	"github.com/watchjournal/watchjournal/journal"
)

func TestLater(t *testing.T) {
	for _, tt := range []struct{ cur, next, want string }{
		{"", "5", "5"},
		{"5", "", "5"},
		{"5", "7", "7"},
		{"9167", "9164", "9167"}, // never backwards
		{"7", "7", "7"},
		{"a1", "b2", "b2"}, // opaque: the server's order
	} {
		if got := later(tt.cur, tt.next); got != tt.want {
			t.Errorf("later(%q, %q) = %q; want %q", tt.cur, tt.next, got, tt.want)
		}
	}
}

func TestReplayed(t *testing.T) {
	cur := journal.IndexEntry{Key: "ns/a", UID: "u1", ResourceVersion: "10"}
	for _, tt := range []struct {
		name    string
		pos     string
		present bool
		typ     journal.EventType
		it      Item
		want    bool
	}{
		{"an event after the position is no replay", "20", true, journal.Modified, Item{Key: "ns/a", UID: "u1", ResourceVersion: "21"}, false},
		{"an ADDED of a new key after the position is no replay", "20", false, journal.Added, Item{Key: "ns/a", UID: "u2", ResourceVersion: "21"}, false},
		{"an event at the position is a replay", "20", true, journal.Modified, Item{Key: "ns/a", UID: "u1", ResourceVersion: "20"}, true},
		{"an event below the position is a replay", "20", false, journal.Added, Item{Key: "ns/b", UID: "u3", ResourceVersion: "9"}, true},
		{"an ADDED of an indexed object is a replay", "20", true, journal.Added, Item{Key: "ns/a", UID: "u1", ResourceVersion: "21"}, true},
		{"an ADDED of a new object of an indexed name is no replay", "20", true, journal.Added, Item{Key: "ns/a", UID: "u2", ResourceVersion: "21"}, false},
		{"opaque resourceVersions: equal is a replay", "x20", false, journal.Added, Item{Key: "ns/b", UID: "u3", ResourceVersion: "x20"}, true},
		{"opaque resourceVersions: different is not", "x20", false, journal.Added, Item{Key: "ns/b", UID: "u3", ResourceVersion: "x19"}, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			c := cur
			if !tt.present {
				c = journal.IndexEntry{}
			}
			if got := replayed(tt.pos, c, tt.present, tt.typ, tt.it); got != tt.want {
				t.Errorf("replayed(%q, %v, %v, %s, %+v) = %v; want %v", tt.pos, c, tt.present, tt.typ, tt.it, got, tt.want)
			}
		})
	}
}
