package journal

import (
	"time"

	"github.com/watchjournal/watchjournal/journal/bolt"
)

// LockWriter takes the writer's lock of the journal file at path without
// opening it, for a tool that replaces the file whole (journalctl compact's
// rewrite): while it is held, Open of the file for writing fails with
// ErrLocked, and a writer that runs is kept out even in the moment it
// reopens its file to give back the store's page bookkeeping. The
// lock is the file <path>.lock; it is tried for timeout (once when timeout
// is shorter than 50 ms).
//
// Errors: ErrLocked when a writer holds the file, or the file system's
// (the directory must be writable). release drops the lock; calls after the
// first do nothing.
func LockWriter(path string, timeout time.Duration) (release func(), err error) {
	return bolt.LockWriter(path, timeout)
}
