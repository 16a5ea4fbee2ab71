package jcache

// Giving back the file's resident pages.
//
// The journal reads its file through a memory map, and every page a read
// touches stays resident in the process (RSS, as file-backed pages): a
// replay that read every stored object, a list committed into the file, or
// reads (Get, List) that touched every object leave the whole file
// resident, about the size of the file. So a feed asks the journal to drop
// its resident pages (journal.Journal.ReleaseMapped: madvise
// MADV_DONTNEED over the map):
//
//   - after each handler's replay (handler.go);
//   - after each completed list or anti-entropy verify, once the loop is
//     watching again (a first start's list, a relist after 410 Gone);
//   - when the objects read through the informers' indexers since the last
//     drop reach unmapReadBytes, checked every unmapInterval.
//
// What it does and does not do: the pages stay in the page cache. The
// process's RSS (VmRSS, RssFile) drops; a cgroup's memory usage counts the
// page cache until the kernel reclaims it, and the kubelet's working set
// (usage less inactive file pages), which evictions go by, drops as the
// unmapped pages age to the inactive list. A page read again faults in
// again (a minor fault when it is still cached). The process's own memory
// (RssAnon) does not change.

import (
	"context"
	"sync/atomic"
	"time"

	"github.com/watchjournal/watchjournal/reconcile"
)

// unmapInterval is how often a feed checks how much was read since the
// last drop; unmapReadBytes how much makes it drop the pages (variables
// for tests).
var (
	unmapInterval        = time.Second
	unmapReadBytes int64 = 32 << 20
)

// pages counts what a feed's readers read since its last drop.
type pages struct {
	read atomic.Int64 // bytes of stored objects read since the last drop
}

// readObject counts n bytes of a stored object read.
func (f *feed) readObject(n int) { f.pages.read.Add(int64(n)) }

// releaseMapped drops the file's resident pages (see the top of the
// file); an error is logged, as the drop changes nothing on disk.
func (f *feed) releaseMapped(why string) {
	f.pages.read.Store(0)
	n, err := f.j.ReleaseMapped()
	if err != nil {
		f.opts.Logger.Error(err, "giving back the cache file's resident pages", "resource", f.res.String(), "after", why)
		return
	}
	f.opts.Logger.V(1).Info("gave back the cache file's resident pages", "resource", f.res.String(), "after", why, "bytes", n)
}

// pager drops the file's pages after each completed list or verify and
// when enough was read, until ctx is done.
func (f *feed) pager(ctx context.Context) {
	var seen int
	for ctx.Err() == nil {
		wctx, cancel := context.WithTimeout(ctx, unmapInterval)
		var done int
		err := f.loop.WaitFor(wctx, func(s reconcile.Status) bool {
			done = s.Lists + s.Verifies
			return s.Phase == reconcile.PhaseWatching && done != seen
		})
		cancel()
		switch {
		case ctx.Err() != nil:
			return
		case err == nil:
			seen = done
			f.releaseMapped("a list")
		case f.pages.read.Load() >= unmapReadBytes:
			f.releaseMapped("reads")
		}
	}
}
