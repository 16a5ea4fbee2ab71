package bolt

// Giving back the memory map's resident pages.
//
// bbolt reads the file through a read-only shared memory map; every page
// a transaction touches becomes resident in the process (its RSS, as
// RssFile) and stays so until the kernel reclaims it. A reader that walks
// every object (a replay, a relist, a first list's commit, which reads the
// pages it rewrites) leaves the whole file resident. ReleaseMapped drops
// the process's mappings of those pages with madvise(MADV_DONTNEED): the
// next access faults the page in again, from the page cache as a rule,
// else from disk. It frees no memory of the machine: the pages stay in the
// page cache, which a cgroup's memory usage counts, until the kernel
// reclaims them; what drops is the process's RSS and, as the unmapped
// pages age to the inactive list, the kubelet's working set (usage less
// inactive file pages), which is what it evicts on.
//
// bbolt's writes go through the file (pwrite), not the map, so they fault
// nothing in; the map is read-only, so dropping a page loses nothing.
//
// Safety: madvise runs inside a bbolt read transaction, which holds
// bbolt's mmap lock for reading, so no remap (a growing file) moves or
// unmaps the region meanwhile, and under the store's read lock, so no
// refresh (refresh.go) closes the handle. The range is the map's start
// (bbolt's DB.Info().Data) to the transaction's high-water mark (Tx.Size:
// every page the file uses, which bbolt keeps inside the map), so it never
// reaches past the mapping into other memory.

import (
	bbolt "go.etcd.io/bbolt"
)

// ReleaseMapped drops the resident pages of the store's memory map
// (madvise(MADV_DONTNEED) over the pages the file uses) and returns how
// many bytes of the map it covered. Readers running meanwhile fault the
// pages they touch in again. On a platform without madvise it does
// nothing and returns 0. Errors: storage.ErrClosed on a closed store; the
// madvise's own error, wrapped.
func (s *store) ReleaseMapped() (int64, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	db, err := s.handle()
	if err != nil {
		return 0, err
	}
	var n int64
	err = db.View(func(tx *bbolt.Tx) error {
		n = tx.Size()
		return madviseDontNeed(db.Info().Data, n)
	})
	if err != nil {
		return 0, classify(err)
	}
	if !canMadvise {
		return 0, nil
	}
	return n, nil
}
