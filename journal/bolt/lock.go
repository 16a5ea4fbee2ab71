//go:build linux || darwin || freebsd || netbsd || openbsd || dragonfly

package bolt

// The writer's lock: one writer per file for the writer's whole life.
//
// bbolt takes an exclusive flock on the database file for a writable open
// and drops it in Close. A writable Store closes and reopens its file now
// and then (refresh.go), so bbolt's lock alone leaves the file unlocked for
// a moment, and another writer that opened it then (journalctl consumers
// reset, a second process) could finish a relist the first writer is still
// committing, which the first would then append again. The lock cannot be
// kept through bbolt's Close: bbolt unlocks the descriptor it locked, and a
// flock belongs to the open file, so a duplicate of that descriptor kept
// aside loses it too, and a second open of the file that held its own
// exclusive flock would keep bbolt's from being taken at all.
//
// So a writable Store also holds an exclusive flock on a sibling file,
// <path>.lock, from Open to Close, reopens included: every writable Open
// takes it first, and one that cannot (within Options.Timeout) fails with
// storage.ErrLocked naming it. Read-only opens do not take it; bbolt's own shared
// lock orders them against the writer (in the reopen's gap a
// reader may get in, and the reopen waits for it: refresh.go). The lock
// file's name stays put when journalctl compact renames a rewritten copy
// over the database, so the lock outlives rewrites too.
//
// A writable open thus needs the file's directory writable, as a relist's
// stage file (<path>.relist) already does; where it is not, Open fails with
// the file system's error (an *os.PathError).
//
// The lock file exists only while a writer holds it (a crash leaves it
// behind, unlocked, and the next writer takes it). Close removes it while
// still holding the lock; a writer that was waiting on the removed file
// then finds that the name no longer names what it locked, and starts over
// on the new file, so two writers never each hold a lock of their own.
//
// Only openers that go through this package take the lock (refresh.go
// says what others can do in the gap).

import (
	"errors"
	"fmt"
	"os"
	"sync"
	"syscall"
	"time"

	"github.com/watchjournal/watchjournal/internal/storage"
)

// lockRetry is how long a writable Open waits between two tries of a held
// lock (bbolt's own flock retry is 50 ms too).
const lockRetry = 50 * time.Millisecond

// writerLock is the exclusive flock a writable Store holds on
// <path>.lock.
type writerLock struct {
	f    *os.File
	path string
}

// lockPath returns the writer's lock file for the database at path.
func lockPath(path string) string { return path + ".lock" }

// lockWriter takes the writer's lock for the database at path, trying for
// timeout (one try when it is shorter than lockRetry). Errors: storage.ErrLocked
// when another writer holds it past timeout, or the file system's.
func lockWriter(path string, timeout time.Duration) (*writerLock, error) {
	lp := lockPath(path)
	deadline := time.Now().Add(timeout)
	for {
		f, err := os.OpenFile(lp, os.O_RDWR|os.O_CREATE, 0o600)
		if err != nil {
			return nil, fmt.Errorf("bolt: writer lock: %w", err)
		}
		for {
			err = syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
			if err != syscall.EINTR {
				break
			}
		}
		switch {
		case err == nil && namesFile(lp, f):
			return &writerLock{f: f, path: lp}, nil
		case err == nil:
			_ = f.Close() // its holder removed it meanwhile: take the new one
			continue
		case !errors.Is(err, syscall.EWOULDBLOCK):
			_ = f.Close()
			return nil, fmt.Errorf("bolt: writer lock %s: %w", lp, err)
		}
		_ = f.Close()
		if !time.Now().Before(deadline) {
			return nil, fmt.Errorf("%w: %s: another writer holds its lock %s (waited %v)", storage.ErrLocked, path, lp, timeout)
		}
		time.Sleep(lockRetry)
	}
}

// release removes the lock file and then drops the lock. A nil lock does
// nothing.
func (l *writerLock) release() {
	if l == nil {
		return
	}
	_ = os.Remove(l.path)
	_ = l.f.Close()
}

// LockWriter takes the writer's lock of the database at path (the file
// <path>.lock) without opening the database, for a tool that replaces the
// file whole, as journalctl compact's rewrite does: holding it keeps every
// writer of this package out, a running one included, even in the moment a
// writer reopens its file. It tries for timeout (once when timeout is
// shorter than 50 ms). Errors: storage.ErrLocked when a writer holds it, or the
// file system's (the directory must be writable). release removes the lock
// file and drops the lock; calls after the first do nothing.
func LockWriter(path string, timeout time.Duration) (release func(), err error) {
	l, err := lockWriter(path, timeout)
	if err != nil {
		return nil, err
	}
	return sync.OnceFunc(l.release), nil
}
