package journal

import (
	"fmt"
	"path/filepath"
	"sync"
	"testing"
	"time"
)

// stepClock is a wall clock that a test steps: each call returns the
// current time and then advances it by a minute.
type stepClock struct{ t time.Time }

func (c *stepClock) now() time.Time { t := c.t; c.t = c.t.Add(time.Minute); return t }

// withClock returns o whose journal stamps events with c's time.
func withClock(o Options, c *stepClock) *Options {
	o.hooks.now = c.now
	return &o
}

// appendAt journals one ADDED for key, its time from the clock.
func appendAt(t *testing.T, j *Journal, key string) uint64 {
	t.Helper()
	var off uint64
	err := j.Writer().Update(func(tx *Tx) (err error) {
		off, err = tx.Append(&Event{Type: Added, Key: key, UID: "u-" + key, ResourceVersion: "1", Origin: OriginWatch})
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return off
}

// The wall clock stepping back an hour in the middle of a journal (and
// staying behind across a restart, and under a relist staged before the
// step): times never decrease with offsets, so OffsetAt (retention by age,
// --since) still finds the first event journaled at or after a time, and
// nothing journaled after the step is taken for older than what came
// before it.
func TestOffsetAt_ClockStepsBack(t *testing.T) {
	t0 := time.Date(2026, 7, 1, 12, 0, 0, 0, time.UTC)
	clock := &stepClock{t: t0}
	path := filepath.Join(t.TempDir(), "j.db")
	j, err := Open(path, withClock(Options{NoSync: true}, clock))
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = j.Close() }()
	for i := 0; i < 4; i++ { // t0, t0+1m, t0+2m, t0+3m
		appendAt(t, j, fmt.Sprintf("wj/before%d", i))
	}
	rel, err := j.Writer().BeginRelist()
	if err != nil {
		t.Fatal(err)
	}
	// Staged at t0+4m, before the step; committed after it.
	if err := rel.Stage([]Event{{Type: Added, Key: "wj/listed", UID: "u-l", ResourceVersion: "2", Origin: OriginRelist}}); err != nil {
		t.Fatal(err)
	}
	clock.t = t0.Add(-time.Hour) // the step back
	for i := 0; i < 3; i++ {
		appendAt(t, j, fmt.Sprintf("wj/after%d", i))
	}
	if _, _, err := rel.Commit("2"); err != nil {
		t.Fatal(err)
	}
	if err := j.Close(); err != nil { // a restart, the clock still behind
		t.Fatal(err)
	}
	if j, err = Open(path, withClock(Options{NoSync: true}, clock)); err != nil {
		t.Fatal(err)
	}
	last := appendAt(t, j, "wj/restarted")

	evs, err := j.Read(1, 100)
	if err != nil {
		t.Fatal(err)
	}
	if len(evs) != int(last) {
		t.Fatalf("read %d events; want %d", len(evs), last)
	}
	for i := 1; i < len(evs); i++ {
		if evs[i].Time.Before(evs[i-1].Time) {
			t.Fatalf("offset %d (%s) at %v is earlier than offset %d (%s) at %v: times went back with the clock",
				evs[i].Offset, evs[i].Key, evs[i].Time, evs[i-1].Offset, evs[i-1].Key, evs[i-1].Time)
		}
	}
	// --since t0+2m30s: from offset 4 (t0+3m) on, every event after the
	// step included.
	off, err := j.OffsetAt(t0.Add(2*time.Minute + 30*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	if off != 4 {
		t.Fatalf("OffsetAt(t0+2m30s) = %d; want 4, the first event at or after it (events: %s)", off, times(evs))
	}
	// Retention by age at the stepped clock's now (t0-55m), MaxAge 1m:
	// nothing journaled is older than t0-56m, so nothing goes.
	if off, err = j.OffsetAt(t0.Add(-56 * time.Minute)); err != nil || off != 1 {
		t.Fatalf("OffsetAt(t0-56m) = %d, %v; want 1 (events: %s)", off, err, times(evs))
	}
}

func times(evs []Event) string {
	s := ""
	for _, e := range evs {
		s += fmt.Sprintf(" %d:%s@%s", e.Offset, e.Key, e.Time.UTC().Format("15:04:05"))
	}
	return s
}

// Two journals of one process, each with its own clock, appending at
// once: each stamps its events with its own clock's times, minute by
// minute, never the other's.
func TestStamp_ClockPerJournal(t *testing.T) {
	type run struct {
		start time.Time
		j     *Journal
	}
	runs := []*run{
		{start: time.Date(2020, 1, 1, 0, 0, 0, 0, time.UTC)},
		{start: time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)},
	}
	for i, r := range runs {
		j, err := Open(filepath.Join(t.TempDir(), fmt.Sprintf("j%d.db", i)), withClock(Options{NoSync: true}, &stepClock{t: r.start}))
		if err != nil {
			t.Fatal(err)
		}
		defer func() { _ = j.Close() }()
		r.j = j
	}
	const n = 50
	var wg sync.WaitGroup
	errs := make(chan error, len(runs))
	for _, r := range runs {
		wg.Go(func() {
			for i := 0; i < n; i++ {
				err := r.j.Writer().Update(func(tx *Tx) error {
					_, err := tx.Append(&Event{Type: Added, Key: fmt.Sprintf("wj/k%02d", i), UID: "u", ResourceVersion: "1", Origin: OriginWatch})
					return err
				})
				if err != nil {
					errs <- fmt.Errorf("journal from %v, append %d: %w", r.start, i, err)
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	for _, r := range runs {
		evs, err := r.j.Read(1, 2*n)
		if err != nil {
			t.Fatal(err)
		}
		if len(evs) != n {
			t.Fatalf("journal from %v: read %d events; want %d", r.start, len(evs), n)
		}
		for i, e := range evs {
			if want := r.start.Add(time.Duration(i) * time.Minute); !e.Time.Equal(want) {
				t.Fatalf("journal from %v: offset %d at %v; want %v, its own clock's (events:%s)", r.start, e.Offset, e.Time.UTC(), want, times(evs))
			}
		}
	}
}
