package bolt

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	bbolt "go.etcd.io/bbolt"

	"github.com/watchjournal/watchjournal/internal/storage"
)

// hooked returns the refresh settings o's store would have, to change.
func hooked(o Options) refreshSettings {
	if o.hooks != nil {
		return *o.hooks
	}
	return defaultRefresh()
}

// lowRefresh returns o whose store reopens its file after n page
// allocations, with no least interval between reopens.
func lowRefresh(o Options, n int64) Options {
	h := hooked(o)
	h.pages, h.interval = n, 0
	o.hooks = &h
	return o
}

// withRefreshInterval returns o whose store reopens its file at most once
// per d.
func withRefreshInterval(o Options, d time.Duration) Options {
	h := hooked(o)
	h.interval = d
	o.hooks = &h
	return o
}

// withRefreshTimeout returns o whose store's reopen waits d for another
// process's lock.
func withRefreshTimeout(o Options, d time.Duration) Options {
	h := hooked(o)
	h.timeout = d
	o.hooks = &h
	return o
}

// withGap returns o whose store runs fn, given the file's path, in every
// refresh's gap.
func withGap(o Options, fn func(path string)) Options {
	h := hooked(o)
	h.gap = fn
	o.hooks = &h
	return o
}

// openTemp opens a new store in the test's temporary directory.
func openTemp(t *testing.T, o Options) (*store, string) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "j.db")
	s, err := open(path, o)
	if err != nil {
		t.Fatal(err)
	}
	return s, path
}

// closeAndCheck closes s and checks its file with checkAll.
func closeAndCheck(t *testing.T, s *store, path string, n int) {
	t.Helper()
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	checkAll(t, path, n)
}

// pages returns the page allocations of s's handle since it was opened.
func pages(s *store) int64 {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return pageCount(s.db)
}

// write commits one transaction of n index keys and n records, keys
// k<from>…, and returns the last offset.
func write(s *store, from, n int) (last uint64, err error) {
	err = s.Update(func(tx storage.Tx) error {
		for i := from; i < from+n; i++ {
			k := []byte(fmt.Sprintf("ns/k%07d", i))
			if err := tx.IndexPut(k, []byte("v")); err != nil {
				return err
			}
			off, err := tx.Append(make([]byte, 1024))
			if err != nil {
				return err
			}
			last = off
		}
		return nil
	})
	return last, err
}

// writeAll commits txs transactions of per keys each with write; a commit
// that fails fails the test.
func writeAll(t *testing.T, s *store, txs, per int) {
	t.Helper()
	for i := 0; i < txs; i++ {
		if _, err := write(s, i*per, per); err != nil {
			t.Fatalf("commit %d: %v", i, err)
		}
	}
}

// checkAll fails unless the file at path holds keys k0…k<n-1> and records
// 1…n, read through a fresh read-only open.
func checkAll(t *testing.T, path string, n int) {
	t.Helper()
	s, err := Open(path, Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	err = s.View(func(tx storage.Tx) error {
		if c := tx.IndexCount(); c != uint64(n) {
			return fmt.Errorf("index count %d, want %d", c, n)
		}
		for i := 0; i < n; i++ {
			if tx.IndexGet([]byte(fmt.Sprintf("ns/k%07d", i))) == nil {
				return fmt.Errorf("key k%07d missing", i)
			}
		}
		if f, l := tx.FirstOffset(), tx.LastOffset(); f != 1 || l != uint64(n) {
			return fmt.Errorf("records %d..%d, want 1..%d", f, l, n)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// The store reopens its file once its refresh pages were allocated, and
// every write before and after is on disk; the new handle starts counting
// from zero.
func TestStore_Refresh_ReopensAndKeepsEverything(t *testing.T) {
	reopened := 0
	o := withGap(lowRefresh(Options{NoSync: true}, 64), func(string) { reopened++ })
	s, path := openTemp(t, o)
	const txs, per = 200, 20
	for i := 0; i < txs; i++ {
		if _, err := write(s, i*per, per); err != nil {
			t.Fatalf("commit %d: %v", i, err)
		}
		if n := pages(s); n >= s.refreshes.pages {
			t.Fatalf("after commit %d the handle has allocated %d pages, past its refresh pages %d: no refresh", i, n, s.refreshes.pages)
		}
	}
	if reopened == 0 {
		t.Fatalf("no refresh in %d commits of %d KiB records", txs, per)
	}
	closeAndCheck(t, s, path, txs*per)
}

// Below twice the refresh pages a refresh does not wait for a reader: with a
// read transaction open it is put off, and the first commit after the
// reader ends does it.
func TestStore_Refresh_PutOffWhileAReaderRuns(t *testing.T) {
	reopened := 0
	// The map must not grow while the reader holds it: bbolt's remap waits
	// for read transactions.
	o := withGap(lowRefresh(Options{NoSync: true, InitialMmapSize: 64 << 20}, 64), func(string) { reopened++ })
	s, _ := openTemp(t, o)
	defer s.Close()
	inView, release, done := make(chan struct{}), make(chan struct{}), make(chan error)
	go func() {
		done <- s.View(func(storage.Tx) error { close(inView); <-release; return nil })
	}()
	<-inView
	i := 0
	for ; pages(s) < s.refreshes.pages; i++ {
		if _, err := write(s, i, 1); err != nil {
			t.Fatal(err)
		}
	}
	if reopened != 0 {
		t.Fatalf("%d refreshes while a read transaction was open", reopened)
	}
	if n := pages(s); n >= 2*s.refreshes.pages {
		t.Fatalf("%d pages allocated by one-key commits, past twice the refresh pages (%d): the test means nothing", n, s.refreshes.pages)
	}
	close(release)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if _, err := write(s, i, 1); err != nil {
		t.Fatal(err)
	}
	if reopened != 1 {
		t.Fatalf("%d refreshes after the reader ended, want 1", reopened)
	}
}

// Readers and writers of many goroutines run across refreshes (for the
// race detector) and see every committed key.
func TestStore_Refresh_ConcurrentReadersAndWriter(t *testing.T) {
	reopened := 0
	s, path := openTemp(t, withGap(lowRefresh(Options{NoSync: true}, 16), func(string) { reopened++ }))
	const txs, per = 100, 10
	stop := make(chan struct{})
	var wg sync.WaitGroup
	errs := make(chan error, 4)
	for r := 0; r < 4; r++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var seen uint64
			for {
				select {
				case <-stop:
					return
				default:
				}
				err := s.View(func(tx storage.Tx) error {
					c := tx.IndexCount()
					if c < seen {
						return fmt.Errorf("index count went back from %d to %d", seen, c)
					}
					seen = c
					return nil
				})
				if err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	for i := 0; i < txs; i++ {
		if _, err := write(s, i*per, per); err != nil {
			t.Fatal(err)
		}
		// One commit allocates a few pages: never much past twice the limit.
		if n := pages(s); n >= 2*s.refreshes.pages+16 {
			t.Fatalf("after commit %d the handle has allocated %d pages: the refresh was put off past twice the refresh pages (%d)", i, n, s.refreshes.pages)
		}
	}
	close(stop)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if reopened == 0 {
		t.Error("no refresh in a run of twice the refresh pages: busy readers put it off for ever")
	}
	closeAndCheck(t, s, path, txs*per)
}

// journalctl compact renaming its copy over the file in the gap: the store
// goes on in the copy, which is the file everyone else reads.
func TestStore_Refresh_FileRewrittenInTheGap(t *testing.T) {
	rewrote := 0
	s, path := openTemp(t, withGap(lowRefresh(Options{NoSync: true}, 64), func(path string) {
		if rewrote > 0 {
			return
		}
		rewrote++
		in, err := bbolt.Open(path, 0o600, &bbolt.Options{ReadOnly: true, Timeout: time.Second})
		if err != nil {
			t.Errorf("rewrite: %v", err)
			return
		}
		defer in.Close()
		tmp := path + ".compact"
		out, err := bbolt.Open(tmp, 0o600, &bbolt.Options{FreelistType: bbolt.FreelistMapType})
		if err == nil {
			err = bbolt.Compact(out, in, 1<<20)
			err = errors.Join(err, out.Close())
		}
		if err == nil {
			err = os.Rename(tmp, path)
		}
		if err != nil {
			t.Errorf("rewrite: %v", err)
		}
	}))
	const txs, per = 100, 20
	writeAll(t, s, txs, per)
	if rewrote == 0 {
		t.Fatal("no refresh, so no rewrite in its gap")
	}
	closeAndCheck(t, s, path, txs*per)
}

// Another writer opening the file in the gap (journalctl consumers reset,
// a second process) gets storage.ErrLocked naming the writer's lock: the store
// keeps the file for its whole life, reopens included, and every commit
// stands. (Without the writer's lock, that Open would take the file and
// the store's later transactions would fail.)
func TestStore_Refresh_AnotherWriterLockedOutInTheGap(t *testing.T) {
	tries := 0
	s, path := openTemp(t, withGap(lowRefresh(Options{NoSync: true}, 64), func(path string) {
		tries++
		other, err := Open(path, Options{Timeout: -1})
		if err == nil {
			_ = other.Close()
			t.Errorf("refresh %d: another writer opened the file in the gap; want storage.ErrLocked", tries)
			return
		}
		if !errors.Is(err, storage.ErrLocked) || !strings.Contains(err.Error(), lockPath(path)) {
			t.Errorf("refresh %d: another writer's Open in the gap = %v; want storage.ErrLocked naming %s", tries, err, lockPath(path))
		}
	}))
	const txs, per = 100, 20
	writeAll(t, s, txs, per)
	if tries == 0 {
		t.Fatalf("no refresh in %d commits", txs)
	}
	closeAndCheck(t, s, path, txs*per)
	if _, err := os.Stat(lockPath(path)); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("lock file after Close: %v; want it removed", err)
	}
}

// A read-only open may still take the file in the gap: the reopen waits
// for it to close, and the store goes on.
func TestStore_Refresh_ReaderInTheGap(t *testing.T) {
	read := 0
	s, path := openTemp(t, withGap(lowRefresh(Options{NoSync: true}, 64), func(path string) {
		r, err := Open(path, Options{ReadOnly: true, Timeout: -1})
		if err != nil {
			t.Errorf("read-only open in the gap: %v", err)
			return
		}
		read++
		go func() { _ = r.View(func(storage.Tx) error { return nil }); _ = r.Close() }()
	}))
	const txs, per = 100, 20
	writeAll(t, s, txs, per)
	if read == 0 {
		t.Fatalf("no refresh in %d commits", txs)
	}
	closeAndCheck(t, s, path, txs*per)
}

// What the writer's lock does not cover: a process that opens the file
// with bbolt directly (or an older watchjournal) knows nothing of it. If
// it takes the file in the gap and keeps it, the commit that triggered the
// refresh stands, later transactions fail with an error matching
// storage.ErrLocked, and the file holds everything committed.
func TestStore_Refresh_ForeignWriterInTheGap(t *testing.T) {
	var other *bbolt.DB
	o := withRefreshTimeout(lowRefresh(Options{NoSync: true, Timeout: 50 * time.Millisecond}, 64), 100*time.Millisecond)
	s, path := openTemp(t, withGap(o, func(path string) {
		if other == nil {
			var err error
			other, err = bbolt.Open(path, 0o600, &bbolt.Options{Timeout: time.Second})
			if err != nil {
				t.Errorf("other writer: %v", err)
			}
		}
	}))
	defer s.Close()
	committed := 0
	for i := 0; i < 100; i++ {
		_, err := write(s, i*20, 20)
		if err != nil {
			if !errors.Is(err, storage.ErrLocked) {
				t.Fatalf("commit %d after the lost reopen: %v, want an error matching storage.ErrLocked", i, err)
			}
			break
		}
		committed++
	}
	if other == nil {
		t.Fatal("no refresh in 100 commits")
	}
	if committed == 100 {
		t.Fatal("every commit succeeded though another writer held the file")
	}
	if err := s.View(func(storage.Tx) error { return nil }); !errors.Is(err, storage.ErrLocked) {
		t.Fatalf("read after the lost reopen: %v, want an error matching storage.ErrLocked", err)
	}
	if err := other.Close(); err != nil {
		t.Fatal(err)
	}
	checkAll(t, path, committed*20)
}

// No more than one reopen per refresh interval, however many pages a fast
// writer allocates; the first commit after the interval does it.
func TestStore_Refresh_AtMostOncePerInterval(t *testing.T) {
	reopened := 0
	o := withGap(withRefreshInterval(lowRefresh(Options{NoSync: true}, 8), time.Hour), func(string) { reopened++ })
	s, _ := openTemp(t, o)
	defer s.Close()
	for i := 0; i < 20; i++ {
		if _, err := write(s, i*20, 20); err != nil {
			t.Fatal(err)
		}
	}
	if n := pages(s); reopened != 0 || n < 2*s.refreshes.pages {
		t.Fatalf("%d refreshes within the interval, %d pages allocated (want none, and at least %d)", reopened, n, 2*s.refreshes.pages)
	}
	s.mu.Lock()
	s.opened = s.opened.Add(-time.Hour) // the interval has passed
	s.mu.Unlock()
	if _, err := write(s, 400, 1); err != nil {
		t.Fatal(err)
	}
	if reopened != 1 {
		t.Fatalf("%d refreshes after the interval, want 1", reopened)
	}
}

// Two stores of one process keep their own refresh settings while both
// commit: one with a low page count reopens its file and stays under it,
// one with the defaults never reopens in a run far past the low count.
func TestStore_Refresh_SettingsPerStore(t *testing.T) {
	type run struct {
		name     string
		o        Options
		reopened int
		s        *store
		path     string
		maxPages int64 // the most pages seen allocated after a commit
	}
	low := &run{name: "low", o: lowRefresh(Options{NoSync: true}, 16)}
	dflt := &run{name: "default", o: Options{NoSync: true}}
	runs := []*run{low, dflt}
	for _, r := range runs {
		r.s, r.path = openTemp(t, withGap(r.o, func(string) { r.reopened++ }))
	}
	const txs, per = 100, 10
	var wg sync.WaitGroup
	errs := make(chan error, len(runs))
	for _, r := range runs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < txs; i++ {
				if _, err := write(r.s, i*per, per); err != nil {
					errs <- fmt.Errorf("%s store, commit %d: %w", r.name, i, err)
					return
				}
				r.maxPages = max(r.maxPages, pages(r.s))
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	if low.reopened == 0 || low.maxPages >= 2*16+16 {
		t.Errorf("low store (16 pages): %d refreshes, at most %d pages allocated; want some, and under %d", low.reopened, low.maxPages, 2*16+16)
	}
	if dflt.reopened != 0 || dflt.maxPages < 2*16+16 {
		t.Errorf("default store (%d pages): %d refreshes, at most %d pages allocated; want none, and at least %d", defaultRefreshPages, dflt.reopened, dflt.maxPages, 2*16+16)
	}
	for _, r := range runs {
		closeAndCheck(t, r.s, r.path, txs*per)
	}
}
