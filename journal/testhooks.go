package journal

// Test hooks: settings that only this package's tests change, carried by
// the Options a journal is opened with.
//
// Invariant: a journal's writes read these from the Journal, copied there
// by Open before it finishes an interrupted relist or Reshard; none reads
// a package variable. A test sets a hook on the options it opens a
// journal with, so two journals of one test, or a journal still closing
// while a later test opens its own, each keep their own. The zero value of
// each hook is the production behaviour.

import "time"

// testHooks are a journal's test settings (Options.hooks).
type testHooks struct {
	// now, when set, is the clock for event times instead of time.Now.
	now func() time.Time
	// afterRelistChunk, when set, runs after each chunk of a relist
	// commit but the last: tests change the marker there, as another
	// writer would.
	afterRelistChunk func()
	// afterDirectChunk, when set, runs after each transaction of a first
	// list's direct appends (tests count them).
	afterDirectChunk func()
	// afterReshardChunk, when set, runs after each chunk of a Reshard but
	// the last: tests copy the file there, as a crash would leave it.
	afterReshardChunk func()
}

// now returns the time to stamp an event with: the wall clock, or the
// test's clock.
func (j *Journal) now() time.Time {
	if j.hooks.now != nil {
		return j.hooks.now()
	}
	return time.Now()
}
