package bolt

// Reopening the file to drop bbolt's per-page bookkeeping.
//
// bbolt (v1.5.0, internal/freelist/shared.go) remembers, for every page it
// hands out from the freelist, the transaction that allocated it: an entry
// in a Go map, deleted only when that page is freed again, in a map that
// never shrinks. Pages that stay in use keep their entries for as long as
// the handle is open. A large initial list leaves many of them behind; a
// handle that has rewritten every page of a file holds one per page. The
// entries serve only to free pages early around long read transactions, and
// a fresh handle starts without them (it treats every page as allocated
// before it opened), so closing and reopening the file gives the memory
// back and changes nothing on disk.
//
// So a writable Store counts the pages bbolt allocated since it opened the
// file (bbolt's TxStats.PageCount, a superset of the pages that get an
// entry) and, after the commit that takes the count past its refresh pages
// (defaultRefreshPages), reopens the file, at most once per refresh interval
// (defaultRefreshInterval): its bookkeeping stays under about that many
// entries (twice that with readers always busy), or a second's worth of
// allocations for a writer faster than that, whatever the object count or
// uptime.
//
// The reopen takes mu exclusively, so no transaction of this process runs
// on the old handle. Until the count reaches twice the refresh pages it does so
// only by TryLock, putting the reopen off to the next commit while a reader
// runs; past that it waits for the readers to end, as bbolt's own remap of
// a growing file does (so a read transaction that waits for a write is a
// deadlock here too, as it is in bbolt).
//
// Between the close and the open bbolt's lock on the file is released for
// a moment, but the writer's lock is not (lock.go). What can get in:
//
//   - a read-only open (journalctl reading the file): the reopen waits for
//     it (defaultRefreshTimeout);
//   - not journalctl compact: its rewrite takes the writer's lock first
//     (LockWriter), so it is refused while a writer lives, gap or not;
//   - a process that opens the file writable with bbolt directly, or an
//     older watchjournal, neither of which knows the writer's lock, and
//     keeps it past that timeout: the reopen fails, the store is broken
//     and every later transaction returns the error (matching storage.ErrLocked).
//     Nothing is lost: everything committed is on disk.
//
// Where the platform has no writer's lock (lock_other.go) the store never
// reopens: one writer per file matters more than the bookkeeping.

import (
	"errors"
	"fmt"
	"time"

	bbolt "go.etcd.io/bbolt"
)

// Defaults of a store's refresh settings. Tests change them per store
// through Options.hooks (refreshSettings), never for the whole package.
const (
	// defaultRefreshPages is how many page allocations since the file was
	// opened make the next commit reopen it.
	defaultRefreshPages int64 = 4096
	// defaultRefreshInterval is the least time between two reopens. A
	// reopen closes and opens the file and leaves the memory map cold (the
	// first read of each page after it is a page fault), so a writer
	// moving tens of megabytes a second reopens once a second, not every
	// 16 MiB; the bookkeeping then stays under a second's worth of page
	// allocations.
	defaultRefreshInterval = time.Second
	// defaultRefreshTimeout is how long a reopen waits for another
	// process's lock.
	defaultRefreshTimeout = 30 * time.Second
)

// refreshSettings are a store's refresh settings, fixed when it is opened.
//
// Invariant: the goroutines that commit on a store read these from the
// store, copied there by open; none reads a package variable. Only tests
// set them (Options.hooks), on the options of the store they build, so two
// stores of one test, or a test's store and an earlier test's store still
// closing, each keep their own.
type refreshSettings struct {
	// pages is how many page allocations since the file was opened make
	// the next commit reopen it.
	pages int64
	// interval is the least time between two reopens; 0: none.
	interval time.Duration
	// timeout is how long a reopen waits for another process's lock.
	timeout time.Duration
	// gap, when set, runs between the close and the open of a refresh,
	// given the file's path: where another process can take the file.
	gap func(path string)
}

// defaultRefresh returns the refresh settings of a store opened without
// test hooks.
func defaultRefresh() refreshSettings {
	return refreshSettings{pages: defaultRefreshPages, interval: defaultRefreshInterval, timeout: defaultRefreshTimeout}
}

// pageCount returns how many pages db has allocated since it was opened.
func pageCount(db *bbolt.DB) int64 {
	st := db.Stats()
	return st.TxStats.GetPageCount()
}

// refresh reopens the file, given the handle's page count after a commit.
// Below twice the store's refresh pages it does so only when no transaction is open;
// past that it waits for the open ones to end.
func (s *store) refresh(pages int64) {
	rs := &s.refreshes
	if !s.mu.TryLock() {
		if pages < 2*rs.pages {
			return
		}
		s.mu.Lock()
	}
	defer s.mu.Unlock()
	if s.db == nil || pageCount(s.db) < rs.pages || time.Since(s.opened) < rs.interval {
		return
	}
	if err := s.db.Close(); err != nil {
		s.db, s.broken = nil, fmt.Errorf("bolt: %s: close before reopening: %w", s.path, err)
		return
	}
	s.db = nil
	if rs.gap != nil {
		rs.gap(s.path)
	}
	bo := s.bo
	bo.Timeout = max(bo.Timeout, rs.timeout)
	db, err := openDB(s.path, bo)
	if errors.Is(err, errReplaced) {
		db, err = openDB(s.path, bo) // a rewrite renamed over it: read the copy
	}
	if err == nil {
		s.db, s.opened = db, time.Now()
		if err = s.init(); err != nil {
			_ = db.Close()
			s.db = nil
		}
	}
	if err != nil {
		s.broken = fmt.Errorf("bolt: %s: reopening it to release bbolt's page bookkeeping: %w", s.path, err)
	}
}
