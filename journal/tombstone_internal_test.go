package journal

import (
	"fmt"
	"path/filepath"
	"testing"
)

// A relist commit interrupted after its first chunk (standing in for a
// crash) rolls forward on the next Open; the tombstone in a later chunk is
// stored with the key's last object then, read from the objects bucket
// (its record was trimmed before the relist), in the roll-forward's
// transaction.
func TestRelist_InterruptedCommit_TombstoneCarriesLastObject(t *testing.T) {
	const n = commitChunk + 10
	path := filepath.Join(t.TempDir(), "j.db")
	j, err := Open(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := j.Settings().KeepObjects(); err != nil {
		t.Fatal(err)
	}
	if err := j.Writer().Update(func(tx *Tx) error {
		_, err := tx.Append(&Event{Type: Added, Key: "wj/old", UID: "u0", ResourceVersion: "1", Origin: OriginWatch, Object: []byte(`{"old":1}`)})
		if err != nil {
			return err
		}
		return tx.SetResourceVersion("1")
	}); err != nil {
		t.Fatal(err)
	}
	if n, _, err := j.Writer().Trim(2, 10, 0, 0); err != nil || n != 1 {
		t.Fatalf("Trim = %d, %v; want wj/old's ADDED", n, err)
	}
	rel, err := j.Writer().BeginRelist()
	if err != nil {
		t.Fatal(err)
	}
	evs := make([]Event, 0, n+1)
	for i := range n {
		evs = append(evs, Event{Type: Added, Key: fmt.Sprintf("wj/k%05d", i), UID: "u", ResourceVersion: "7", Origin: OriginRelist, Object: []byte(`{}`)})
	}
	evs = append(evs, Event{Type: Deleted, Key: "wj/old", UID: "u0", ResourceVersion: "1", Origin: OriginRelist})
	if err := rel.Stage(evs); err != nil {
		t.Fatal(err)
	}
	if _, err := rel.mark("7"); err != nil {
		t.Fatal(err)
	}
	if err := j.finishRelistChunks(1); err != nil {
		t.Fatal(err)
	}
	_ = j.Close() // the crash

	j, st := reopen(t, path)
	if st.Objects != n || st.ResourceVersion != "7" {
		t.Fatalf("after the roll-forward: %d objects at rv %q; want %d at 7", st.Objects, st.ResourceVersion, n)
	}
	last, err := j.Read(st.LastOffset, 1)
	if err != nil || len(last) != 1 {
		t.Fatalf("Read(%d) = %v, %v", st.LastOffset, last, err)
	}
	if e := last[0]; e.Type != Deleted || e.Key != "wj/old" || string(e.Object) != `{"old":1}` || e.PrevOffset != 1 {
		t.Fatalf("rolled-forward tombstone = %+v (object %s); want wj/old's DELETED with its last object, PrevOffset 1", e, e.Object)
	}
}
