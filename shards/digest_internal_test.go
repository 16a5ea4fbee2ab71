package shards

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/watchjournal/watchjournal/internal/hashrange"
	"github.com/watchjournal/watchjournal/journal"
)

// An index cut into chunks reads back whole; each chunk stays under
// chunkBytes; a changed entry changes one chunk's name only.
func TestChunks_RoundTrip(t *testing.T) {
	var entries []journal.IndexEntry
	for i := range 20000 {
		entries = append(entries, journal.IndexEntry{
			Key: fmt.Sprintf("ns/object-%06d", i), UID: fmt.Sprintf("%08x-1b4e-4f3a-9c2d-%012x", i*7919, i*104729), ResourceVersion: fmt.Sprint(100000 + i),
		})
	}
	chunks, err := encodeChunks("g-m", entries)
	if err != nil {
		t.Fatal(err)
	}
	if len(chunks) < 2 {
		t.Fatalf("%d chunks for 20,000 entries; want several", len(chunks))
	}
	var back []journal.IndexEntry
	var names []string
	for _, c := range chunks {
		if len(c.data) > chunkBytes {
			t.Errorf("chunk %s holds %d bytes; want at most %d", c.name, len(c.data), chunkBytes)
		}
		es, err := decodeChunk(c.data, hashrange.Full())
		if err != nil {
			t.Fatal(err)
		}
		if !slices.IsSortedFunc(es, func(a, b journal.IndexEntry) int { return strings.Compare(a.Key, b.Key) }) {
			t.Errorf("chunk %s is not in key order", c.name)
		}
		back = append(back, es...)
		names = append(names, c.name)
	}
	slices.SortFunc(back, func(a, b journal.IndexEntry) int { return strings.Compare(a.Key, b.Key) })
	if !slices.Equal(back, entries) {
		t.Fatalf("decoded %d entries; want the %d encoded, equal", len(back), len(entries))
	}

	// Only the entries of a part of the space.
	half := hashrange.Set{{First: 0, Last: 1<<63 - 1}}
	n := 0
	for _, c := range chunks {
		es, _ := decodeChunk(c.data, half)
		for _, e := range es {
			if !half.ContainsUID(e.UID) {
				t.Fatalf("decodeChunk(half) returned %v, outside the half", e)
			}
		}
		n += len(es)
	}
	want := 0
	for _, e := range entries {
		if half.ContainsUID(e.UID) {
			want++
		}
	}
	if n != want {
		t.Errorf("decodeChunk(half) returned %d entries; want %d", n, want)
	}

	// One changed resourceVersion: one new chunk name.
	entries[1234].ResourceVersion = "999999"
	again, err := encodeChunks("g-m", entries)
	if err != nil {
		t.Fatal(err)
	}
	changed := 0
	for _, c := range again {
		if !slices.Contains(names, c.name) {
			changed++
		}
	}
	if len(again) != len(chunks) || changed != 1 {
		t.Errorf("after one change: %d chunks, %d new names; want %d chunks, 1 new name", len(again), changed, len(chunks))
	}
}
