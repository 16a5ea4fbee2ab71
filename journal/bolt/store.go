package bolt

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"runtime/debug"
	"sync"
	"syscall"
	"time"

	bbolt "go.etcd.io/bbolt"
	bberrors "go.etcd.io/bbolt/errors"

	"github.com/watchjournal/watchjournal/internal/storage"
)

var _ storage.Store = (*store)(nil)

// SchemaVersion is the layout version this build writes. A file with a
// larger version is refused with storage.ErrNewerSchema. A writable Open of an
// older file migrates it to this version; a read-only one reads it as it
// is.
//
//   - 1: the first layout.
//   - 2: journal records may be of record version 2 (an event with a
//     Reason, package journal's event.go). Buckets and keys are those of
//     1, so the migration from 1 only records the new number: it keeps an
//     older build, which would read such records as damaged, from opening
//     the file (storage.ErrNewerSchema).
//   - 2 also: an index value may carry the offset of its key's last event
//     with an object (package journal's index.go; values without it are
//     still read and are rewritten as their keys change), and the objects
//     bucket holds only copies of records retention trimming removed.
//   - 3: journal records may be of record version 3 (an event with the
//     offset of its key's previous event, Event.PrevOffset). As from 1
//     to 2, the migration from 2 only records the new number, so that an
//     older build refuses the file (storage.ErrNewerSchema) instead of reading
//     those records as damaged.
//   - 4: stored objects may be in Kubernetes protobuf ("k8s\x00" first)
//     as well as JSON (package reconcile's wire.go; journal.Event.Object).
//     Records and buckets are those of 3, so the migration from 3 only
//     records the new number, so that an older build, which would hand
//     protobuf to JSON decoders, refuses the file (storage.ErrNewerSchema).
const SchemaVersion = 4

// magic identifies a watchjournal file in the meta bucket.
var magic = []byte("watchjournal")

var (
	bucketMeta      = []byte("meta")
	bucketIndex     = []byte("index")
	bucketJournal   = []byte("journal")
	bucketSeen      = []byte("seen")
	bucketConsumers = []byte("consumers")

	metaMagic  = []byte("magic")
	metaSchema = []byte("schema")
	metaNext   = []byte("next")  // next offset to assign, 8-byte big-endian
	metaCount  = []byte("count") // number of index keys, 8-byte big-endian
	metaBytes  = []byte("bytes") // total size of journal records, 8-byte big-endian
)

// Options configure Open. The zero value is a writable store with a 1 s lock
// timeout and fsync on every commit.
type Options struct {
	// ReadOnly opens the file with a shared lock; writes fail with storage.ErrReadOnly.
	ReadOnly bool
	// Timeout is how long Open waits for the file lock. Zero means 1 s;
	// a negative value means do not wait at all (one try).
	Timeout time.Duration
	// NoSync skips fsync on commit. Only for tests and benchmarks: a crash
	// may then lose committed transactions.
	NoSync bool
	// InitialMmapSize is the initial size of the memory map, in bytes.
	// Zero means bbolt's default. A read transaction keeps the map from
	// growing, so a larger map avoids blocking the writer behind readers.
	InitialMmapSize int

	// hooks, when set, replace the store's refresh settings (refresh.go);
	// only this package's tests set them. nil: defaultRefresh.
	hooks *refreshSettings
}

// store is an open watchjournal bbolt file, the storage.Store Open
// returns. It is safe for concurrent use: many read transactions and one
// write transaction at a time. A writable store reopens its file now and
// then, to drop bbolt's per-page bookkeeping (refresh.go).
type store struct {
	// mu is read-held by every transaction and held by Close and by a
	// refresh, which replaces db.
	mu       sync.RWMutex
	db       *bbolt.DB // nil after Close or a failed refresh
	broken   error     // why db is nil after a failed refresh
	path     string
	readOnly bool
	bo       bbolt.Options // as Open was given them, for a refresh
	opened   time.Time     // when db was opened
	// refreshes are the settings of its refreshes (refresh.go), fixed by
	// open.
	refreshes refreshSettings
	// lock is the writer's lock (lock.go), held from Open to Close across
	// every refresh; nil for a read-only Store, and where the platform has
	// none (then the Store never refreshes).
	lock *writerLock
}

// Open opens or creates the file at path (mode 0600) and checks that it is a
// watchjournal file of a schema this build knows. The store it returns is
// the one implementation of package journal's storage interface.
//
// A writable open also takes the writer's lock, <path>.lock (lock.go), and
// holds it until Close: one writer per file for the writer's whole life.
// It creates that file, so it needs the directory writable.
//
// Errors (internal/storage's, which package journal re-exports):
// ErrLocked when the lock (bbolt's on the file, or the writer's) is held
// past Options.Timeout, ErrNotExist for a read-only open of a missing
// file, ErrCorrupt for a file that is not a readable bbolt database,
// ErrForeign for a bbolt file of another program, ErrNewerSchema for a
// newer watchjournal; each wraps the cause.
func Open(path string, o Options) (storage.Store, error) {
	s, err := open(path, o)
	if err != nil {
		return nil, err
	}
	return s, nil
}

// open is Open, returning the store itself (for this package's tests).
func open(path string, o Options) (*store, error) {
	timeout := o.Timeout
	switch {
	case timeout == 0:
		timeout = time.Second
	case timeout < 0:
		timeout = time.Millisecond // bbolt treats 0 as "wait forever"
	}
	fi, statErr := os.Stat(path)
	switch {
	case statErr == nil && fi.IsDir():
		return nil, fmt.Errorf("bolt: %s is a directory, not a database file", path)
	case o.ReadOnly && errors.Is(statErr, fs.ErrNotExist):
		return nil, fmt.Errorf("%w: %s", storage.ErrNotExist, path)
	}
	bo := bbolt.Options{
		Timeout:  timeout,
		ReadOnly: o.ReadOnly,
		NoSync:   o.NoSync,
		// The freelist is synced: without it, bbolt rebuilds it at open by
		// walking every page in a goroutine of its own, where a corrupt page
		// panics beyond any recover and kills the process. A synced
		// freelist keeps corruption a typed error.
		NoFreelistSync:  false,
		FreelistType:    bbolt.FreelistMapType,
		InitialMmapSize: o.InitialMmapSize,
	}
	var lock *writerLock
	if !o.ReadOnly {
		var err error
		if lock, err = lockWriter(path, timeout); err != nil {
			return nil, err
		}
	}
	db, err := openDB(path, bo)
	if err != nil {
		lock.release()
		return nil, err
	}
	s := &store{db: db, path: path, readOnly: o.ReadOnly, bo: bo, opened: time.Now(), lock: lock, refreshes: defaultRefresh()}
	if o.hooks != nil {
		s.refreshes = *o.hooks
	}
	if err := s.init(); err != nil {
		_ = db.Close()
		lock.release()
		return nil, err
	}
	return s, nil
}

// errReplaced marks an open that found path naming another file than the
// one it locked.
var errReplaced = errors.New("replaced while waiting for its lock")

// openDB opens path with bo and classifies its errors as Open documents;
// an error for a file replaced meanwhile also matches errReplaced.
func openDB(path string, bo bbolt.Options) (db *bbolt.DB, err error) {
	// bbolt may panic, or fault on the memory map, on some corrupt files
	// instead of returning an error.
	defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
	defer recoverCorrupt(path, &err)
	var f *os.File
	bo.OpenFile = func(name string, flag int, mode os.FileMode) (*os.File, error) {
		var err error
		f, err = os.OpenFile(name, flag, mode)
		return f, err
	}
	db, err = bbolt.Open(path, 0o600, &bo)
	if err == nil && f != nil && !namesFile(path, f) {
		// The file was replaced (e.g. by an offline compaction's rename)
		// while we waited for its lock: we hold a file nobody will read.
		_ = db.Close()
		return nil, fmt.Errorf("%w: %s was %w; open it again", storage.ErrLocked, path, errReplaced)
	}
	if err != nil {
		switch {
		case errors.Is(err, bberrors.ErrTimeout):
			return nil, fmt.Errorf("%w: %s (timeout %v)", storage.ErrLocked, path, bo.Timeout)
		case errors.Is(err, bberrors.ErrInvalid), errors.Is(err, bberrors.ErrChecksum),
			errors.Is(err, bberrors.ErrVersionMismatch), errors.Is(err, bberrors.ErrInvalidMapping), isTruncated(path):
			return nil, fmt.Errorf("%w: %s: %v", storage.ErrCorrupt, path, err)
		}
		return nil, fmt.Errorf("bolt: %w", err)
	}
	return db, nil
}

// recoverCorrupt, deferred under SetPanicOnFault, makes a panic (or a
// fault on the memory map) of bbolt's on the file at path ErrCorrupt.
func recoverCorrupt(path string, err *error) {
	if r := recover(); r != nil {
		*err = fmt.Errorf("%w: %s: %v", storage.ErrCorrupt, path, r)
	}
}

// namesFile reports whether path still names the open file f.
func namesFile(path string, f *os.File) bool {
	a, err1 := os.Stat(path)
	b, err2 := f.Stat()
	return err1 == nil && err2 == nil && os.SameFile(a, b)
}

// isTruncated reports whether the file is too short to be a bbolt database.
func isTruncated(path string) bool {
	fi, err := os.Stat(path)
	return err == nil && fi.Size() > 0 && fi.Size() < 2*int64(os.Getpagesize())
}

// init checks the magic and schema, creating them and the buckets in a new
// (empty) file. bbolt panics, or faults on the memory map, on some corrupt
// pages: that is storage.ErrCorrupt too.
func (s *store) init() (err error) {
	defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
	defer recoverCorrupt(s.path, &err)
	var empty, foreign bool
	var found uint32
	err = s.db.View(func(tx *bbolt.Tx) error {
		meta := tx.Bucket(bucketMeta)
		if meta == nil {
			empty = true
			_ = tx.ForEach(func([]byte, *bbolt.Bucket) error { empty = false; return nil })
			foreign = !empty
			return nil
		}
		v := meta.Get(metaSchema)
		if foreign = !bytes.Equal(meta.Get(metaMagic), magic) || len(v) != 4; !foreign {
			found = binary.BigEndian.Uint32(v)
		}
		return nil
	})
	switch {
	case err != nil:
		return fmt.Errorf("%w: %s: %v", storage.ErrCorrupt, s.path, err)
	case foreign:
		return fmt.Errorf("%w: %s", storage.ErrForeign, s.path)
	case empty && s.readOnly:
		return fmt.Errorf("%w: %s is empty", storage.ErrForeign, s.path)
	case empty:
		return s.db.Update(func(tx *bbolt.Tx) error {
			for _, name := range [][]byte{bucketMeta, bucketIndex, bucketJournal, bucketSeen, bucketConsumers} {
				if _, err := tx.CreateBucketIfNotExists(name); err != nil {
					return err
				}
			}
			meta := tx.Bucket(bucketMeta)
			return errors.Join(meta.Put(metaSchema, binary.BigEndian.AppendUint32(nil, SchemaVersion)),
				meta.Put(metaNext, u64(1)), meta.Put(metaMagic, magic))
		})
	case found > SchemaVersion:
		return fmt.Errorf("%w: %s has schema %d, this build knows up to %d", storage.ErrNewerSchema, s.path, found, SchemaVersion)
	case found < SchemaVersion && !s.readOnly:
		// A migration in one transaction: from 1, 2 and 3 nothing but the
		// number changes (see SchemaVersion).
		err := s.db.Update(func(tx *bbolt.Tx) error {
			return tx.Bucket(bucketMeta).Put(metaSchema, binary.BigEndian.AppendUint32(nil, SchemaVersion))
		})
		if err != nil {
			return fmt.Errorf("bolt: %s: migrate schema %d to %d: %w", s.path, found, SchemaVersion, err)
		}
	}
	return nil
}

// Close closes the file and releases its locks (the writer's last). It
// waits for open transactions to end. Closing a closed store does nothing.
func (s *store) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	var err error
	if s.db != nil {
		err = s.db.Close()
	}
	s.lock.release()
	s.db, s.broken, s.lock = nil, nil, nil
	return err
}

// Path returns the file's path as given to Open.
func (s *store) Path() string { return s.path }

// ReadOnly reports whether the store was opened read-only.
func (s *store) ReadOnly() bool { return s.readOnly }

// Size returns the file's size on disk in bytes (0 if it cannot be read).
func (s *store) Size() int64 {
	fi, err := os.Stat(s.path)
	if err != nil {
		return 0
	}
	return fi.Size()
}

// handle returns the open database, or the error a transaction on a closed
// (or failed to reopen) Store gets. Call it with mu read-held.
func (s *store) handle() (*bbolt.DB, error) {
	switch {
	case s.db != nil:
		return s.db, nil
	case s.broken != nil:
		return nil, s.broken
	}
	return nil, fmt.Errorf("%w: %s", storage.ErrClosed, bbolt.ErrDatabaseNotOpen)
}

// View runs fn in a read transaction. bbolt panics, or faults on the
// memory map, on some corrupt pages: such a panic is returned as
// ErrCorrupt (fault.go). A panic of fn's own rolls the transaction back
// and goes on.
func (s *store) View(fn func(storage.Tx) error) error {
	_, _, err := s.run(false, fn)
	return err
}

// Update runs fn in a write transaction, committed when fn returns nil and
// rolled back otherwise: a failed commit changes nothing. A full disk gives
// an error matching storage.ErrNoSpace; a corrupt page, storage.ErrCorrupt
// (fault.go). A panic of fn's own rolls the transaction back and goes on.
//
// After a commit that takes the pages allocated since the file was (re)opened
// past the store's refresh pages, Update reopens the file (refresh.go), at
// most once per refresh interval; a failed reopen does not undo the commit, and later
// transactions return its error.
func (s *store) Update(fn func(storage.Tx) error) error {
	if s.readOnly {
		return storage.ErrReadOnly
	}
	pages, due, err := s.run(true, fn)
	if err == nil && due {
		s.refresh(pages)
	}
	return err
}

// run is View (writable false: fn's error is returned as it is) and Update
// without the refresh; pages is the handle's count of page allocations
// after the commit, and due reports that a refresh is due.
func (s *store) run(writable bool, fn func(storage.Tx) error) (pages int64, due bool, err error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	db, err := s.handle()
	if err != nil {
		return 0, false, err
	}
	defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
	var btx *bbolt.Tx
	committed := false
	defer func() {
		if btx != nil && !committed {
			rollback(btx)
		}
		if r := recover(); r != nil {
			if e, ok := fileFault(s.path, r); ok {
				pages, due, err = 0, false, e
				return
			}
			panic(r)
		}
	}()
	if btx, err = begin(db, writable); err != nil {
		return 0, false, classify(err)
	}
	if err := fn(&tx{tx: btx}); err != nil || !writable {
		if writable {
			err = classify(err)
		}
		return 0, false, err
	}
	err = commit(btx)
	committed = true // or bbolt rolled it back
	if err != nil {
		return 0, false, classify(err)
	}
	pages = pageCount(db)
	return pages, s.lock != nil && pages >= s.refreshes.pages && time.Since(s.opened) >= s.refreshes.interval, nil
}

// classify marks a full disk with storage.ErrNoSpace, and a closed store with
// storage.ErrClosed.
func classify(err error) error {
	if errors.Is(err, bbolt.ErrDatabaseNotOpen) {
		return fmt.Errorf("%w: %s", storage.ErrClosed, err)
	}
	if err != nil && errors.Is(err, syscall.ENOSPC) {
		return fmt.Errorf("%w: %w", storage.ErrNoSpace, err)
	}
	return err
}

func u64(v uint64) []byte { return binary.BigEndian.AppendUint64(nil, v) }

func getU64(b []byte) uint64 {
	if len(b) != 8 {
		return 0
	}
	return binary.BigEndian.Uint64(b)
}
