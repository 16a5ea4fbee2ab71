package journal_test

import (
	"fmt"
	"path/filepath"
	"slices"
	"testing"

	"github.com/watchjournal/watchjournal/journal"
)

// Ensure that a first list into an empty index (direct mode, whose index
// entries a transaction puts in bulk, in key order) leaves the same index
// as the same objects appended one by one, over more than one direct
// transaction, with values spread over the keys and keys without values;
// and that a later change of a key moves it in the index as for any other.
func TestIndexes_FirstListInBulk_SameAsAppends(t *testing.T) {
	const n = 4100 // three direct transactions
	colors := []string{"red", "blue", "green", "violet", "amber", "teal", "grey"}
	evs := func() []journal.Event {
		var out []journal.Event
		for i := range n {
			body := `{}`
			if i%11 != 0 {
				body = fmt.Sprintf(`{"color":%q}`, colors[(i*7919)%len(colors)])
			}
			e := obj(journal.Added, fmt.Sprintf("wj/cm-%05d", i), fmt.Sprintf("u%d", i), fmt.Sprint(i+1), body)
			e.Origin = journal.OriginRelist
			out = append(out, e)
		}
		return out
	}
	listed := open(t, filepath.Join(t.TempDir(), "listed.db"))
	withIndex(t, listed, nil)
	r, err := listed.Writer().BeginRelist()
	if err != nil {
		t.Fatal(err)
	}
	if err := r.Stage(evs()); err != nil {
		t.Fatal(err)
	}
	if _, _, err := r.Commit(fmt.Sprint(n)); err != nil {
		t.Fatal(err)
	}
	appended := open(t, filepath.Join(t.TempDir(), "appended.db"))
	withIndex(t, appended, nil)
	appendEvents(t, appended, fmt.Sprint(n), evs()...)

	for _, v := range append(slices.Clone(colors), "any", "none") {
		got, err1 := listed.Indexes().Lookup("color", v)
		want, err2 := appended.Indexes().Lookup("color", v)
		if err1 != nil || err2 != nil || !slices.Equal(got, want) {
			t.Fatalf("LookupIndex(color, %q) after a first list = %d keys (%v); after appends %d keys (%v)", v, len(got), err1, len(want), err2)
		}
	}
	if got, _ := listed.Indexes().Lookup("color", "any"); len(got) != n-(n+10)/11 {
		t.Fatalf("LookupIndex(color, any) = %d keys; want %d", len(got), n-(n+10)/11)
	}
	appendEvents(t, listed, fmt.Sprint(n+1), obj(journal.Modified, "wj/cm-00001", "u1", fmt.Sprint(n+1), `{"color":"black"}`))
	wantIndex(t, listed, "black", "wj/cm-00001")
	if got, _ := listed.Indexes().Lookup("color", colors[7919%len(colors)]); slices.Contains(got, "wj/cm-00001") {
		t.Fatalf("wj/cm-00001 is still under its listed color after its MODIFIED")
	}
	if rep, err := listed.Check(); err != nil || !rep.OK() {
		t.Fatalf("Check after the first list = %+v, %v; want sound", rep, err)
	}
}
