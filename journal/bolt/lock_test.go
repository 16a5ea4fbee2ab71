//go:build linux || darwin || freebsd || netbsd || openbsd || dragonfly

package bolt

import (
	"errors"
	"io/fs"
	"os"
	"strings"
	"testing"

	"github.com/watchjournal/watchjournal/internal/storage"
)

// A second writable Open of a file a Store writes fails with storage.ErrLocked
// naming the writer's lock, also in the same process; a read-only Open
// does not take that lock. Once the writer closes, the lock file is gone
// and the next writer takes the file.
func TestStore_WriterLock_OneWriterAtATime(t *testing.T) {
	s, path := openTemp(t, Options{NoSync: true})
	if _, err := os.Stat(lockPath(path)); err != nil {
		t.Fatalf("lock file while a writer holds the file: %v", err)
	}
	_, err := Open(path, Options{Timeout: -1})
	if !errors.Is(err, storage.ErrLocked) || !strings.Contains(err.Error(), lockPath(path)) {
		t.Fatalf("second writable Open = %v; want storage.ErrLocked naming %s", err, lockPath(path))
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(lockPath(path)); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("lock file after Close: %v; want none", err)
	}
	r, err := Open(path, Options{ReadOnly: true, Timeout: -1})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(lockPath(path)); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("lock file under a read-only open: %v; want none", err)
	}
	_ = r.Close()
	s2, err := Open(path, Options{Timeout: -1})
	if err != nil {
		t.Fatalf("writable Open after the first writer closed: %v", err)
	}
	_ = s2.Close()
}

// A lock file left behind by a crash (present, unlocked) does not keep
// the next writer out.
func TestStore_WriterLock_LeftByACrash(t *testing.T) {
	s, path := openTemp(t, Options{NoSync: true})
	_ = s.Close()
	if err := os.WriteFile(lockPath(path), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	s, err := open(path, Options{Timeout: -1})
	if err != nil {
		t.Fatalf("Open with a stale lock file: %v", err)
	}
	_ = s.Close()
}

// A writer waiting on a lock file that its holder removes on Close starts
// over on a new one: after the holder's release, two waiters never both
// hold the lock.
func TestStore_WriterLock_RemovedWhileWaiting(t *testing.T) {
	path := t.TempDir() + "/j.db"
	a, err := lockWriter(path, -1)
	if err != nil {
		t.Fatal(err)
	}
	// b opened the file a holds (as a waiter does) and takes the lock
	// once a released it: the name then no longer names that file.
	f, err := os.Open(lockPath(path))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	a.release()
	c, err := lockWriter(path, -1)
	if err != nil {
		t.Fatalf("lock after release: %v", err)
	}
	defer c.release()
	if namesFile(lockPath(path), f) {
		t.Fatal("the lock file's name still names the released file: a waiter on it would hold a second lock")
	}
	if _, err := lockWriter(path, -1); !errors.Is(err, storage.ErrLocked) {
		t.Fatalf("second lock while c holds it = %v; want storage.ErrLocked", err)
	}
}
