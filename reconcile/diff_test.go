package reconcile

import (
	"fmt"
	"reflect"
	"testing"

	"github.com/watchjournal/watchjournal/journal"
)

func ie(key, uid, rv string) journal.IndexEntry {
	return journal.IndexEntry{Key: key, UID: uid, ResourceVersion: rv}
}
func li(key, uid, rv string) Item {
	return Item{Key: key, UID: uid, ResourceVersion: rv, Object: []byte(key)}
}

// short renders events as "TYPE key uid rv[ reason]" for readable failures.
func short(evs []journal.Event) []string {
	out := []string{}
	for _, e := range evs {
		s := fmt.Sprintf("%s %s %s %s", e.Type, e.Key, e.UID, e.ResourceVersion)
		if e.Reason != "" {
			s += " " + string(e.Reason)
		}
		out = append(out, s)
	}
	return out
}

func TestDiff(t *testing.T) {
	tests := []struct {
		name    string
		indexed []journal.IndexEntry
		listed  []Item
		want    []string
	}{
		{"empty index and list give nothing", nil, nil, []string{}},
		{"initial list adds every object in key order",
			nil, []Item{li("wj/a", "u1", "10"), li("wj/b", "u2", "11")},
			[]string{"ADDED wj/a u1 10", "ADDED wj/b u2 11"}},
		{"unchanged objects give nothing",
			[]journal.IndexEntry{ie("wj/a", "u1", "10")}, []Item{li("wj/a", "u1", "10")}, []string{}},
		{"changed resourceVersion gives MODIFIED",
			[]journal.IndexEntry{ie("wj/a", "u1", "10")}, []Item{li("wj/a", "u1", "12")},
			[]string{"MODIFIED wj/a u1 12"}},
		{"key missing from the list gives a tombstone DELETED with the indexed UID and RV",
			[]journal.IndexEntry{ie("wj/a", "u1", "10"), ie("wj/b", "u2", "11"), ie("wj/c", "u3", "12")},
			[]Item{li("wj/a", "u1", "10"), li("wj/c", "u3", "12")},
			[]string{"DELETED wj/b u2 11"}},
		{"same name with a new UID gives DELETED old then ADDED new, never MODIFIED",
			[]journal.IndexEntry{ie("wj/b", "u2", "11")}, []Item{li("wj/b", "u9", "20")},
			[]string{"DELETED wj/b u2 11 gone", "ADDED wj/b u9 20"}},
		{"scenario S01: update a, delete b, create d",
			[]journal.IndexEntry{ie("wj/a", "ua", "1"), ie("wj/b", "ub", "2"), ie("wj/c", "uc", "3")},
			[]Item{li("wj/a", "ua", "7"), li("wj/c", "uc", "3"), li("wj/d", "ud", "9")},
			[]string{"MODIFIED wj/a ua 7", "DELETED wj/b ub 2", "ADDED wj/d ud 9"}},
		{"resourceVersions are opaque: different strings differ even if numerically equal",
			[]journal.IndexEntry{ie("a", "u", "010")}, []Item{li("a", "u", "10")}, []string{"MODIFIED a u 10"}},
		{"resourceVersions beyond 2^53 compare exactly",
			[]journal.IndexEntry{ie("a", "u", "9007199254740992")}, []Item{li("a", "u", "9007199254740993")},
			[]string{"MODIFIED a u 9007199254740993"}},
		{"non-numeric resourceVersions work",
			[]journal.IndexEntry{ie("a", "u", "W/abc")}, []Item{li("a", "u", "W/abc")}, []string{}},
		{"every indexed key gone gives DELETED for each",
			[]journal.IndexEntry{ie("a", "u1", "1"), ie("b", "u2", "2")}, nil,
			[]string{"DELETED a u1 1", "DELETED b u2 2"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := short(Diff(tt.indexed, tt.listed))
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("Diff(%v, %v) = %q; want %q", tt.indexed, tt.listed, got, tt.want)
			}
		})
	}
}

func TestDiff_TombstoneHasNoObject(t *testing.T) {
	evs := Diff([]journal.IndexEntry{ie("a", "u1", "1")}, nil)
	if len(evs) != 1 || evs[0].Object != nil {
		t.Fatalf("Diff(a, nil) = %+v; want one DELETED with nil Object", evs)
	}
}

func TestFold(t *testing.T) {
	cur := ie("wj/a", "u1", "10")
	tests := []struct {
		name    string
		present bool
		typ     journal.EventType
		item    Item
		want    []string
	}{
		{"ADDED of a new key", false, journal.Added, li("wj/a", "u1", "10"), []string{"ADDED wj/a u1 10"}},
		{"ADDED repeating the indexed RV is a duplicate", true, journal.Added, li("wj/a", "u1", "10"), []string{}},
		{"MODIFIED", true, journal.Modified, li("wj/a", "u1", "11"), []string{"MODIFIED wj/a u1 11"}},
		{"MODIFIED repeating the indexed RV is a duplicate", true, journal.Modified, li("wj/a", "u1", "10"), []string{}},
		{"MODIFIED of an absent key becomes ADDED", false, journal.Modified, li("wj/a", "u1", "11"), []string{"ADDED wj/a u1 11"}},
		{"ADDED with a new UID replaces the old object", true, journal.Added, li("wj/a", "u2", "12"),
			[]string{"DELETED wj/a u1 10 gone", "ADDED wj/a u2 12"}},
		{"DELETED", true, journal.Deleted, li("wj/a", "u1", "13"), []string{"DELETED wj/a u1 13"}},
		{"DELETED of an absent key gives nothing", false, journal.Deleted, li("wj/a", "u1", "13"), []string{}},
		{"DELETED of another UID deletes the indexed one", true, journal.Deleted, li("wj/a", "u2", "13"),
			[]string{"DELETED wj/a u1 10 gone"}},
		// An event below what the index holds is a replay.
		{"ADDED below the indexed RV is a replay", true, journal.Added, li("wj/a", "u1", "9"), []string{}},
		{"MODIFIED below the indexed RV is a replay", true, journal.Modified, li("wj/a", "u1", "9"), []string{}},
		{"ADDED of an older object than the indexed is a replay", true, journal.Added, li("wj/a", "u0", "9"), []string{}},
		{"DELETED below the indexed RV is a replay", true, journal.Deleted, li("wj/a", "u1", "9"), []string{}},
		{"DELETED of an older object than the indexed is a replay", true, journal.Deleted, li("wj/a", "u0", "9"), []string{}},
		{"MODIFIED with an RV that does not compare and differs", true, journal.Modified, li("wj/a", "u1", "x9"),
			[]string{"MODIFIED wj/a u1 x9"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := cur
			if !tt.present {
				c = journal.IndexEntry{}
			}
			got := short(Fold(c, tt.present, tt.typ, tt.item))
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("Fold(%v, %v, %s, %v) = %q; want %q", c, tt.present, tt.typ, tt.item, got, tt.want)
			}
		})
	}
}

func TestSortedAfter(t *testing.T) {
	for _, tt := range []struct {
		after string
		keys  []string
		want  bool
	}{
		{"", nil, true},
		{"", []string{"a", "b"}, true},
		{"a", []string{"b", "c"}, true},
		{"b", []string{"b"}, false},
		{"", []string{"b", "a"}, false},
		{"", []string{"a", "a"}, false},
		{"ns/a", []string{"ns-x/a"}, false}, // '-' sorts before '/'
	} {
		var items []Item
		for _, k := range tt.keys {
			items = append(items, Item{Key: k})
		}
		if got := sortedAfter(tt.after, items); got != tt.want {
			t.Errorf("sortedAfter(%q, %v) = %v; want %v", tt.after, tt.keys, got, tt.want)
		}
	}
}

// typed sets kind and apiVersion structurally: an object whose name,
// namespace, labels or data spell "kind" still gets them; one that has
// them keeps its own; a metadata-only object keeps metadata only, as the
// resource's kind, without kubectl's last-applied annotation.
func TestTyped(t *testing.T) {
	for _, tt := range []struct {
		in, want string
		meta     bool
	}{
		{in: `{"metadata":{"name":"a"}}`, want: `{"kind":"ConfigMap","apiVersion":"v1","metadata":{"name":"a"}}`},
		{in: `{}`, want: `{"kind":"ConfigMap","apiVersion":"v1"}`},
		{in: `{"kind":"ConfigMap","apiVersion":"v1"}`, want: `{"kind":"ConfigMap","apiVersion":"v1"}`},
		{in: `{"metadata":{"name":"kind"}}`, want: `{"kind":"ConfigMap","apiVersion":"v1","metadata":{"name":"kind"}}`},
		{in: `{"metadata":{"name":"a","namespace":"kind"},"data":{"apiVersion":"x"}}`,
			want: `{"kind":"ConfigMap","apiVersion":"v1","metadata":{"name":"a","namespace":"kind"},"data":{"apiVersion":"x"}}`},
		{in: ` {"metadata":{"labels":{"kind":"x"}},"data":{"kind":"é☃"}}`,
			want: `{"kind":"ConfigMap","apiVersion":"v1","metadata":{"labels":{"kind":"x"}},"data":{"kind":"é☃"}}`},
		{in: `{"metadata":{"name":"a"},"kind":""}`, want: `{"kind":"ConfigMap","apiVersion":"v1","metadata":{"name":"a"}}`},
		{in: `{"kind":"PartialObjectMetadata","apiVersion":"meta.k8s.io/v1","metadata":{"name":"s","annotations":{"kubectl.kubernetes.io/last-applied-configuration":"{\"data\":1}","a":"b"}},"data":{"p":"eA=="}}`,
			want: `{"kind":"ConfigMap","apiVersion":"v1","metadata":{"name":"s","annotations":{"a":"b"}}}`, meta: true},
	} {
		got, err := typed([]byte(tt.in), "ConfigMap", "v1", tt.meta)
		if err != nil || string(got) != tt.want {
			t.Errorf("typed(%s, meta=%v) = %s, %v; want %s", tt.in, tt.meta, got, err, tt.want)
		}
	}
	for _, in := range []string{`[]`, `"kind"`, `{"metadata":`, ``} {
		if got, err := typed([]byte(in), "ConfigMap", "v1", false); err == nil {
			t.Errorf("typed(%q) = %s, nil; want an error", in, got)
		}
	}
}
