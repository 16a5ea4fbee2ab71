package jcache

// Whether an Exact source's consumer exists in its file: one owner, one
// lock.
//
// Two goroutines of a source change the consumer. The committer creates
// it with its first commit (after a replay, "Crash safety of a replay" in
// exact.go) and commits it after that; the feed deletes it when retention
// trimmed past it, and replays. Were the two to decide on their own, the
// committer could commit the old point between the feed's decision and
// its delete: it would find the consumer still there, count it as
// existing, and after the delete every later commit would fail with
// ErrNoConsumer while nothing held the file's retention back.
//
// So consumerState holds the consumer's phase and every change of it
// happens under its lock, commits included:
//
//	absent    --commit-->          present   (the consumer is created)
//	present   --trimmed past-->    resetting (the feed deletes it)
//	resetting --tracker reset-->   absent    (the replay's first commit creates it)
//
// A commit while resetting is refused (errConsumerResetting), and so is a
// point read from the tracker before its reset (above its point now): the
// tracker's point only moves forward between two resets, so a point
// above it is from before the last one. The committer tries again at the
// next move of the point.

import (
	"errors"
	"sync"
)

// consumerPhase is whether the consumer exists, as the source knows it.
type consumerPhase int

const (
	consumerAbsent    consumerPhase = iota // not in the file: the next commit creates it
	consumerPresent                        // in the file: commits move it
	consumerResetting                      // the feed is deleting it to replay
)

// errConsumerResetting is returned by a commit refused because the feed
// is resetting the consumer, or because the point was read before the
// reset; the committer does not log it and tries again.
var errConsumerResetting = errors.New("jcache: the consumer is being reset after retention trimmed past it")

// consumerState is the phase of one source's consumer and the lock every
// change of it is made under. The zero value is absent.
type consumerState struct {
	mu    sync.Mutex
	phase consumerPhase
}

// exists reports whether the consumer is present.
func (c *consumerState) exists() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.phase == consumerPresent
}

// set records, before the committer runs, whether the consumer exists.
func (c *consumerState) set(exists bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.phase = consumerAbsent
	if exists {
		c.phase = consumerPresent
	}
}

// commit runs create when the consumer is absent, move when it is
// present, and marks it present once either succeeded; it refuses with
// errConsumerResetting while resetting or when stale reports that the
// point is from before the tracker's last reset.
func (c *consumerState) commit(stale func() bool, create, move func() error) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.phase == consumerResetting || stale() {
		return errConsumerResetting
	}
	do := move
	if c.phase == consumerAbsent {
		do = create
	}
	if err := do(); err != nil {
		return err
	}
	c.phase = consumerPresent
	return nil
}

// reset moves the consumer to resetting, calls paused (a test's hook; nil
// in use), deletes it with del and resets the tracker with resetTracker,
// then marks it absent. A failed delete leaves it resetting: the source
// stops with that error.
func (c *consumerState) reset(paused func(), del func() error, resetTracker func()) error {
	c.mu.Lock()
	c.phase = consumerResetting
	c.mu.Unlock()
	if paused != nil {
		paused()
	}
	if err := del(); err != nil {
		return err
	}
	resetTracker()
	c.mu.Lock()
	c.phase = consumerAbsent
	c.mu.Unlock()
	return nil
}
