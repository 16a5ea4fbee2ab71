package journal

import (
	"errors"
	"testing"

	"github.com/watchjournal/watchjournal/internal/storage"
)

// Each chunk of a relist commit re-checks the commit marker it continues
// from (nonce and position): when it changed between two chunks, as it
// would if another writer moved the commit on, the commit stops with a
// *stageMarkerError and appends nothing more (it would append again what
// the other writer appended).
func TestRelist_MarkerChangedBetweenChunks_Stops(t *testing.T) {
	const n = 3 * commitChunk
	cases := []struct {
		name    string
		tamper  func(tx storage.Tx) error
		present bool
	}{
		{"another writer moved the position on", func(tx storage.Tx) error {
			nonce, size, pos, _ := decodeStageMeta(tx.Meta(metaRelistStage))
			return tx.SetMeta(metaRelistStage, encodeStageMeta(nonce, size, pos+1))
		}, true},
		{"another writer began another commit", func(tx storage.Tx) error {
			nonce, size, pos, _ := decodeStageMeta(tx.Meta(metaRelistStage))
			return tx.SetMeta(metaRelistStage, encodeStageMeta(nonce+1, size, pos))
		}, true},
		{"another writer finished the commit", func(tx storage.Tx) error {
			if err := tx.SetMeta(metaRelistStage, nil); err != nil {
				return err
			}
			return tx.SetMeta(metaRelistRV, nil)
		}, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var j *Journal
			var head uint64
			tampered := false
			var o Options
			o.hooks.afterRelistChunk = func() {
				if tampered {
					return
				}
				tampered = true
				if err := j.store.Update(c.tamper); err != nil {
					t.Errorf("tamper: %v", err)
				}
				head, _ = j.Head()
			}
			_, j, rel := stagedRelistWith(t, n, &o)
			defer j.Close()
			_, _, err := rel.Commit("7")
			var me *stageMarkerError
			if !errors.As(err, &me) {
				t.Fatalf("Commit after the marker changed between chunks = %v; want a *stageMarkerError", err)
			}
			if me.Present != c.present {
				t.Errorf("stageMarkerError.Present = %v; want %v (%v)", me.Present, c.present, me)
			}
			if !tampered {
				t.Fatal("the commit moved everything in one chunk: the test means nothing")
			}
			if got, _ := j.Head(); got != head {
				t.Fatalf("head %d after the stopped commit; want %d, as the changed marker left it", got, head)
			}
		})
	}
}
