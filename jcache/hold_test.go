package jcache_test

import "sync"

// hold is what a test's handler or hook blocks on to hold the cache in a
// state. A test releases it on its path, and defers release right after the
// deferred stop of whatever the blocked goroutine belongs to (defers run
// last-in first-out, so the hold releases first): a t.Fatal before the
// test's own release then ends the test with its message, not with a stop
// that waits forever for the blocked handler.
type hold struct {
	ch   chan struct{}
	once sync.Once
}

func newHold() *hold { return &hold{ch: make(chan struct{})} }

// wait blocks until the hold is released.
func (g *hold) wait() { <-g.ch }

// release ends every wait, now and later; it may be called again.
func (g *hold) release() { g.once.Do(func() { close(g.ch) }) }
