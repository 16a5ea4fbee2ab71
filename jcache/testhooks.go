package jcache

// Test hooks: settings that only tests change, carried by the options a
// cache or an Exact controller is built from.
//
// Invariant: every goroutine of a cache or an Exact source reads its
// settings from the object it serves (a feed's Options, a registration,
// an ExactSource), copied there when the object is built; none reads a
// package variable. A test sets a hook on the options it builds (the
// helpers in export_test.go), so tests that run one after another, or a
// test that restores a setting while an earlier cache's goroutines still
// run, never race on a shared setting. The zero value of each hook is the
// production behaviour, so options built without them are unchanged.

import (
	"sync/atomic"
	"time"
)

// Defaults of the settings the hooks can change.
const (
	// defaultReplayChunk bounds a replay chunk in objects (handler.go).
	defaultReplayChunk = 5000
	// defaultRetentionInterval is the longest time between two trims of
	// a file without appends (retention.go).
	defaultRetentionInterval = 10 * time.Second
)

// testHooks are a cache's test settings (Options.hooks). Zero fields mean
// the defaults above; false means the production behaviour.
type testHooks struct {
	// replayChunk bounds a replay chunk in objects; 0: defaultReplayChunk.
	replayChunk int
	// retentionInterval is the longest time between two trims of a file
	// without appends; 0: defaultRetentionInterval.
	retentionInterval time.Duration
	// noRetainFinalCommit skips the hold's last commit when a feed stops
	// (a SIGKILL-like stop).
	noRetainFinalCommit bool
	// abandonShardLease leaves the shard group's Lease behind when the
	// cache stops (a SIGKILL-like stop: shardgroup.go).
	abandonShardLease bool
	// shardGate, when set, holds the shard group's first renewal until it
	// is closed: the handlers join before the group has a range
	// (shardgroup.go).
	shardGate <-chan struct{}
	// readDecodes, when set, counts the objects reads decode (Get, List,
	// an index: informer.decodeRead).
	readDecodes *atomic.Int64
	// processKey, when set, is the process keyring of a cache given no
	// key, in place of the package's: a cache of another process
	// (seal.go).
	processKey *processKeys
}

// processKeys returns the process keyring of a cache built from o.
func (o *Options) processKeys() *processKeys {
	if o.hooks.processKey != nil {
		return o.hooks.processKey
	}
	return &processKey
}

// replayChunk returns the replay chunk bound of a cache built from o (nil:
// the default).
func (o *Options) replayChunk() int {
	if o == nil || o.hooks.replayChunk <= 0 {
		return defaultReplayChunk
	}
	return o.hooks.replayChunk
}

// retentionInterval returns the longest time between two trims of a file
// of a cache built from o without appends.
func (o *Options) retentionInterval() time.Duration {
	if o.hooks.retentionInterval <= 0 {
		return defaultRetentionInterval
	}
	return o.hooks.retentionInterval
}

// options returns the options of the cache that opened inf's file; nil
// when inf has no feed (building it failed).
func (inf *informer) options() *Options {
	if inf.f == nil {
		return nil
	}
	return inf.f.opts
}
