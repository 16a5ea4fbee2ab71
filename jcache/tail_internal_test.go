package jcache

import (
	"errors"
	"fmt"
	"slices"
	"testing"

	"github.com/watchjournal/watchjournal/journal"
)

func ev(off uint64, t journal.EventType, key, obj string) journal.Event {
	e := journal.Event{Offset: off, Type: t, Key: key}
	if obj != "" {
		e.Object = []byte(obj)
	}
	return e
}

// A read of the file at a head below the batch sees the batch's latest
// state per key over the file's keys, in key order; a read of the file
// at or past the batch's offsets (it committed meanwhile) sees the file.
func TestTail_OverlayMergesInKeyOrder(t *testing.T) {
	tl := tail{read: func(key string) ([]byte, error) { return []byte(key + "@file"), nil }}
	settle := tl.stage([]journal.Event{
		ev(11, journal.Deleted, "ns/b", "b0"),
		ev(12, journal.Added, "ns/c", "c1"),
		ev(13, journal.Modified, "ns/d", "d1"),
		ev(14, journal.Added, "ns/e", "e1"),
		ev(15, journal.Modified, "ns/d", "d2"),
	})
	file := [][2]string{{"ns/a", "a0"}, {"ns/b", "b0"}, {"ns/d", "d0"}}
	read := func(head uint64) []string {
		var got []string
		m := &merge{o: tl.overlay("ns/").above(head), emit: func(k string, b []byte) error { got = append(got, k+"="+string(b)); return nil }}
		for _, kv := range file {
			b, ok, err := m.file(kv[0], []byte(kv[1]))
			if err != nil {
				t.Fatal(err)
			}
			if ok {
				got = append(got, kv[0]+"="+string(b))
			}
		}
		if err := m.rest(); err != nil {
			t.Fatal(err)
		}
		return got
	}
	if got, want := read(10), []string{"ns/a=a0", "ns/c=c1", "ns/d=d2", "ns/e=e1"}; !slices.Equal(got, want) {
		t.Fatalf("read at head 10 = %v; want %v", got, want)
	}
	if got, want := read(15), []string{"ns/a=a0", "ns/b=b0", "ns/d=d0"}; !slices.Equal(got, want) {
		t.Fatalf("read at head 15 (the batch committed) = %v; want the file's %v", got, want)
	}
	if e, ok := tl.entry("ns/d"); !ok || string(e.obj) != "d2" || e.offset != 15 {
		t.Fatalf("entry(ns/d) = %+v, %v; want d2 at 15", e, ok)
	}
	// The object before each MODIFIED: the file's, then the batch's own.
	evs, olds, _ := tl.after(12)
	if len(evs) != 3 || string(olds[0]) != "ns/d@file" || olds[1] != nil || string(olds[2]) != "d1" {
		t.Fatalf("after(12): %d events, olds %q; want 3, [ns/d@file, nil, d1]", len(evs), olds)
	}
	settle(nil)
	if o := tl.overlay(""); o != nil {
		t.Fatalf("overlay after the commit = %v; want none", o)
	}
}

// A handler is given the tail only from right after what it has, and an
// aborted batch counts an abort; a committed one does not.
func TestTail_AfterAndAborts(t *testing.T) {
	var tl tail
	batch := func(from uint64, n int) []journal.Event {
		var evs []journal.Event
		for i := range n {
			evs = append(evs, ev(from+uint64(i), journal.Added, fmt.Sprintf("k%d", i), "x"))
		}
		return evs
	}
	settle := tl.stage(batch(5, 3))
	for _, c := range []struct {
		pos  uint64
		want []uint64
	}{{3, nil}, {4, []uint64{5, 6, 7}}, {6, []uint64{7}}, {7, nil}} {
		evs, _, aborts := tl.after(c.pos)
		var got []uint64
		for _, e := range evs {
			got = append(got, e.Offset)
		}
		if !slices.Equal(got, c.want) || aborts != 0 {
			t.Errorf("after(%d) = %v, aborts %d; want %v, 0", c.pos, got, aborts, c.want)
		}
	}
	settle(errors.New("no space"))
	if evs, _, aborts := tl.after(4); evs != nil || aborts != 1 {
		t.Fatalf("after an abort: after(4) = %v, aborts %d; want none, 1", evs, aborts)
	}
	tl.stage(batch(5, 2))(nil)
	if n := tl.abortCount(); n != 1 {
		t.Fatalf("abortCount after a commit = %d; want 1", n)
	}
}

// Two batches in flight: the first's commit lets only it go; an abort
// of the first drops the second with it.
func TestTail_TwoBatches(t *testing.T) {
	var tl tail
	offsets := func() []uint64 {
		evs, _, _ := tl.after(0)
		var out []uint64
		for _, e := range evs {
			out = append(out, e.Offset)
		}
		return out
	}
	s1 := tl.stage([]journal.Event{ev(1, journal.Added, "a", "a1"), ev(2, journal.Added, "b", "b1")})
	s2 := tl.stage([]journal.Event{ev(3, journal.Modified, "a", "a2")})
	if _, olds, _ := tl.after(2); string(olds[0]) != "a1" {
		t.Fatalf("the object before offset 3 = %q; want a1, the first batch's", olds[0])
	}
	s1(nil)
	if got := offsets(); got != nil {
		t.Fatalf("after(0) once the first batch committed = %v; want none (the tail starts at 3)", got)
	}
	if evs, _, _ := tl.after(2); len(evs) != 1 || evs[0].Offset != 3 {
		t.Fatalf("after(2) = %v; want offset 3", evs)
	}
	s2(errors.New("stale"))
	if evs, _, n := tl.after(2); evs != nil || n != 1 {
		t.Fatalf("after the second batch aborted: after(2) = %v, aborts %d; want none, 1", evs, n)
	}

	s3 := tl.stage([]journal.Event{ev(4, journal.Added, "c", "c1")})
	tl.stage([]journal.Event{ev(5, journal.Added, "d", "d1")})
	s3(errors.New("no space"))
	if o := tl.overlay(""); o != nil {
		t.Fatalf("overlay after the first of two batches aborted = %v; want none", o)
	}
}
