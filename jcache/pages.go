package jcache

// Giving back the file's resident pages.
//
// The journal reads its file through a memory map, and every page a read
// touches stays resident in the process (RSS, as file-backed pages): a
// replay that read every stored object, a list committed into the file, or
// reads (Get, List) that touched every object leave the whole file
// resident, about the size of the file. So a feed asks the journal to drop
// its resident pages (journal.Settings.ReleaseMapped: madvise
// MADV_DONTNEED over the map):
//
//   - after each handler's replay (handler.go);
//   - after each completed list or anti-entropy verify, once the loop is
//     watching again (a first start's list, a relist after 410 Gone);
//   - whenever the objects read since the last drop, through the
//     informers' indexers (Get, List) and by the handlers (the events
//     they are given), reach unmapReadBytes: so at most about that much of
//     the objects stays resident from reads, whatever the file's size.
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
	"sync"
	"sync/atomic"

	"github.com/watchjournal/watchjournal/reconcile"
)

// unmapReadBytes is how many bytes of objects read make a feed drop the
// file's pages.
const unmapReadBytes = 8 << 20

// pages counts what a feed's readers read since its last drop.
type pages struct {
	read atomic.Int64  // bytes of stored objects read since the last drop
	kick chan struct{} // signalled when read reaches unmapReadBytes
}

// readObject counts n bytes of a stored object read.
func (f *feed) readObject(n int) {
	if f.pages.read.Add(int64(n)) < unmapReadBytes || f.pages.kick == nil {
		return
	}
	select {
	case f.pages.kick <- struct{}{}:
	default:
	}
}

// releaseMapped drops the file's resident pages (see the top of the
// file); an error is logged, as the drop changes nothing on disk.
func (f *feed) releaseMapped(why string) {
	f.pages.read.Store(0)
	n, err := f.j.Settings().ReleaseMapped()
	if err != nil {
		f.opts.Logger.Error(err, "giving back the cache file's resident pages", "resource", f.res.String(), "after", why)
		return
	}
	f.opts.Logger.V(1).Info("gave back the cache file's resident pages", "resource", f.res.String(), "after", why, "bytes", n)
}

// pager drops the file's pages after each completed list or verify and
// when enough was read, until ctx is done. kick is f.pages.kick.
func (f *feed) pager(ctx context.Context, kick <-chan struct{}) {
	var wg sync.WaitGroup
	defer wg.Wait()
	wg.Go(func() {
		for {
			select {
			case <-ctx.Done():
				return
			case <-kick:
				f.releaseMapped("reads")
			}
		}
	})
	var seen int
	for {
		var done int
		err := f.waitFor(ctx, func(s reconcile.Status) bool {
			done = s.Lists + s.Verifies
			return s.Phase == reconcile.PhaseWatching && done != seen
		})
		if err != nil {
			return
		}
		seen = done
		f.releaseMapped("a list")
	}
}
