//go:build !(linux || darwin || freebsd || netbsd || openbsd || dragonfly)

package bolt

import "time"

// This platform has no writer's lock (lock.go): lockWriter returns nil, so
// a writable Store keeps bbolt's lock by never reopening its file, and
// keeps bbolt's page bookkeeping for its life.

type writerLock struct{}

func lockWriter(string, time.Duration) (*writerLock, error) { return nil, nil }

func (l *writerLock) release() {}

// LockWriter does nothing on this platform (no writer's lock; the writer
// never reopens its file, so bbolt's own lock keeps other writers out): it
// returns a release that does nothing.
func LockWriter(string, time.Duration) (release func(), err error) { return func() {}, nil }
