package journal

import (
	"path/filepath"
	"testing"

	"github.com/watchjournal/watchjournal/journal/bolt"
)

// A crash between the commit marker and the last chunk must roll forward on
// the next Open: the relist is applied whole, never half.
func TestRelist_CrashDuringCommitRollsForward(t *testing.T) {
	path := filepath.Join(t.TempDir(), "j.db")
	j, err := Open(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	rel, _ := j.BeginRelist()
	evs := make([]Event, commitChunk+10)
	for i := range evs {
		evs[i] = Event{Type: Added, Key: string(rune('a'+i%26)) + string(rune('a'+i/26%26)) + string(rune('a'+i/676)), UID: "u", ResourceVersion: "7", Origin: OriginRelist}
	}
	if err := rel.Stage(evs); err != nil {
		t.Fatal(err)
	}
	// What Commit does first, then "crash" before finishRelist.
	if err := j.store.Update(func(tx *bolt.Tx) error { return tx.SetMeta(metaRelistRV, []byte("7")) }); err != nil {
		t.Fatal(err)
	}
	_ = j.Close()

	j, err = Open(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer j.Close()
	st, _ := j.Stats()
	if st.Objects != uint64(len(evs)) || st.LastOffset != uint64(len(evs)) || st.ResourceVersion != "7" {
		t.Fatalf("Stats() after reopen = %+v; want %d objects and events at rv 7", st, len(evs))
	}
}
