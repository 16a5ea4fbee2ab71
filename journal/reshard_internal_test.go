package journal

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/watchjournal/watchjournal/internal/hashrange"
	"github.com/watchjournal/watchjournal/internal/storage"
)

// reshardState is what a test compares of a file after a Reshard: every
// event (offset, type, key, reason), the index keys, the recorded range,
// the pending ranges, the resourceVersion, and whether a marker is left.
type reshardState struct {
	events  []string
	keys    []string
	sel     string
	pending string
	rv      string
	marker  bool
}

func readReshardState(t *testing.T, j *Journal) reshardState {
	t.Helper()
	var s reshardState
	for _, e := range readAll(t, j) {
		s.events = append(s.events, fmt.Sprintf("%d %s %s %s", e.Offset, e.Type, e.Key, e.Reason))
	}
	if _, err := j.Snapshot(func(e IndexEntry) error { s.keys = append(s.keys, e.Key); return nil }); err != nil {
		t.Fatal(err)
	}
	rec, _, err := j.Resource()
	if err != nil {
		t.Fatal(err)
	}
	s.pending, _ = j.Writer().ShardPending()
	s.sel = rec.ShardSelector
	s.rv, _ = j.ResourceVersion()
	_ = j.store.View(func(tx storage.Tx) error { s.marker = tx.Meta(metaReshard) != nil; return nil })
	return s
}

// A Reshard of a range whose leaving keys span several chunks commits in
// transactions of at most commitChunk events, and a crash after any chunk
// (the file as it is on disk then, copied) rolls forward on the next Open
// to exactly the file an uninterrupted Reshard leaves: every key that
// left journaled DELETED once, none twice, none lost, the staying keys
// kept, the new range recorded.
func TestReshard_Chunked_CrashAfterEachChunkRollsForward(t *testing.T) {
	const (
		lowHalf = "shardRange(object.metadata.uid, '0x0000000000000000', '0x8000000000000000')"
		quarter = "shardRange(object.metadata.uid, '0x0000000000000000', '0x4000000000000000')"
	)
	low, _ := hashrange.Parse(lowHalf)
	q, _ := hashrange.Parse(quarter)
	res := Resource{GVR: schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}, Namespace: "wj", ShardSelector: lowHalf}
	dir := t.TempDir()
	path := filepath.Join(dir, "j.db")
	var j *Journal
	var copies []string
	var prev uint64
	o := Options{Resource: &res, NoSync: true}
	o.hooks.afterReshardChunk = func() {
		head, _ := j.Head()
		if head-prev > commitChunk {
			t.Errorf("chunk %d appended %d events; want at most %d", len(copies)+1, head-prev, commitChunk)
		}
		prev = head
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		c := filepath.Join(dir, fmt.Sprintf("crash-after-chunk-%d.db", len(copies)+1))
		if err := os.WriteFile(c, b, 0o600); err != nil {
			t.Fatal(err)
		}
		copies = append(copies, c)
	}
	j, err := Open(path, &o)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = j.Close() }()
	var leave, keep []string
	err = j.Writer().Update(func(tx *Tx) error {
		for i := 0; len(leave) < 3*commitChunk+17; i++ {
			uid := fmt.Sprintf("uid-%d", i)
			if !low.ContainsUID(uid) {
				continue
			}
			key := fmt.Sprintf("wj/k%06d", i)
			if q.ContainsUID(uid) {
				keep = append(keep, key)
			} else {
				leave = append(leave, key)
			}
			if _, err := tx.Append(&Event{Type: Added, Key: key, UID: uid, ResourceVersion: "5", Origin: OriginWatch}); err != nil {
				return err
			}
		}
		return tx.SetResourceVersion("5")
	})
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(keep)
	prev, _ = j.Head()
	r, err := j.Writer().Reshard(quarter)
	if err != nil {
		t.Fatal(err)
	}
	if r.Left != len(leave) || r.Last-r.First+1 != uint64(len(leave)) {
		t.Fatalf("Reshard = %+v; want %d left at consecutive offsets", r, len(leave))
	}
	if len(copies) < 3 {
		t.Fatalf("%d chunk boundaries for %d keys leaving; want at least 3 (chunks of %d)", len(copies), len(leave), commitChunk)
	}
	want := readReshardState(t, j)
	// The uninterrupted Reshard itself: each key that left once, reason
	// moved, after the ADDEDs; the rest kept.
	n := len(leave) + len(keep)
	if len(want.events) != n+len(leave) || !slices.Equal(want.keys, keep) || want.sel != q.Selector() || want.rv != "5" || want.marker {
		t.Fatalf("after Reshard: %d events, %d keys, selector %q, rv %q, marker left %v; want %d events, the %d staying keys, %q, rv 5, no marker",
			len(want.events), len(want.keys), want.sel, want.rv, want.marker, n+len(leave), len(keep), q.Selector())
	}
	deleted := map[string]int{}
	for _, e := range want.events[n:] {
		var off int
		var typ, key, reason string
		fmt.Sscanf(e, "%d %s %s %s", &off, &typ, &key, &reason)
		if typ != string(Deleted) || reason != string(ReasonMoved) {
			t.Fatalf("event %q after the ADDEDs; want DELETED … moved", e)
		}
		deleted[key]++
	}
	for _, k := range leave {
		if deleted[k] != 1 {
			t.Errorf("%s journaled DELETED %d times; want once", k, deleted[k])
		}
	}
	for i, c := range copies {
		t.Run(fmt.Sprintf("crash after chunk %d", i+1), func(t *testing.T) {
			cj, err := Open(c, &Options{NoSync: true})
			if err != nil {
				t.Fatal(err)
			}
			defer cj.Close()
			got := readReshardState(t, cj)
			if !slices.Equal(got.events, want.events) {
				t.Errorf("events after the roll-forward: %d, want %d; first difference at %d", len(got.events), len(want.events), firstDiff(got.events, want.events))
			}
			if !slices.Equal(got.keys, want.keys) || got.sel != want.sel || got.pending != want.pending || got.rv != want.rv || got.marker {
				t.Errorf("after the roll-forward: %d keys, selector %q, pending %q, rv %q, marker %v; want %d keys, %q, %q, %q, none",
					len(got.keys), got.sel, got.pending, got.rv, got.marker, len(want.keys), want.sel, want.pending, want.rv)
			}
		})
	}
}

// firstDiff returns the first index at which a and b differ.
func firstDiff(a, b []string) int {
	for i := range min(len(a), len(b)) {
		if a[i] != b[i] {
			return i
		}
	}
	return min(len(a), len(b))
}
