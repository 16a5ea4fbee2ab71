// Package storage is the storage interface package journal owns: what the
// journal needs of a file, in plain types (byte keys and values, uint64
// offsets and counts), and the errors a store returns. journal/bolt is its
// one implementation, as hashicorp/raft-boltdb implements raft's LogStore
// and StableStore; package journal holds a Store and never a bbolt type.
//
// It sits below both (journal imports bolt to open the file, so bolt
// cannot import journal), and under the module's internal/ rather than
// journal/internal/ so that the benchmarks, which write the store alone,
// can name its transaction.
//
// # Buckets
//
// The buckets are those journal/bolt's package comment lists (Layout). The encodings of the values (records, index entries, the resource) are
// package journal's; the store only keeps the counts it is asked for (the
// index's keys, the journal's bytes, the next offset) in step with them.
//
// # Panics
//
// A store turns a panic raised while it reads or writes the file's pages
// (bbolt panics, or faults on the memory map, on some corrupt pages) into
// an error matching ErrCorrupt, and rolls the transaction back. A panic in
// the function given to View or Update, or in a callback given to a Tx
// method, is not the store's: the transaction is rolled back and the panic
// goes on with its value. A memory fault (a runtime.Error with an Addr
// method, which the runtime raises instead of crashing only while the store
// asks it to, see runtime/debug.SetPanicOnFault) is the file's wherever it
// happens inside a transaction: the slices a Tx hands out are the file's
// memory-mapped pages.
package storage

import "errors"

// Store is an open journal file. It is safe for concurrent use: many read
// transactions and one write transaction at a time.
type Store interface {
	// View runs fn in a read transaction.
	View(fn func(Tx) error) error
	// Update runs fn in a write transaction, committed when fn returns nil
	// and rolled back otherwise: a failed commit changes nothing. A full
	// disk gives an error matching ErrNoSpace; a read-only store,
	// ErrReadOnly.
	Update(fn func(Tx) error) error
	// Close closes the file and releases its locks. It waits for open
	// transactions to end. Closing a closed Store does nothing; any later
	// transaction returns ErrClosed.
	Close() error
	// Path returns the file's path as given to open it.
	Path() string
	// ReadOnly reports whether the store was opened read-only.
	ReadOnly() bool
	// Size returns the file's size on disk in bytes (0 if it cannot be
	// read).
	Size() int64
	// ReleaseMapped gives back the process's resident pages of the file
	// (a memory-mapped store's map, which every read faults in): they
	// stay in the page cache, and the next read of a page faults it in
	// again. It returns how many bytes of the file it covered (0 where
	// there is nothing to release). Errors: ErrClosed.
	ReleaseMapped() (int64, error)
}

// Tx is a read or write transaction over the buckets. Its methods are not
// safe for concurrent use; slices they return, or hand to a callback, are
// valid until the transaction ends: copy what you keep. A write method of a
// read transaction returns an error. Scans call fn until it returns false
// or an error, which the scan returns.
type Tx interface {
	// Meta returns the value of a meta entry, or nil when it is not set.
	Meta(name string) []byte
	// SetMeta sets a meta entry; a nil value deletes it.
	SetMeta(name string, v []byte) error

	// IndexGet returns the index value for key, or nil.
	IndexGet(key []byte) []byte
	// IndexPut sets key's index value, counting new keys.
	IndexPut(key, val []byte) error
	// IndexDelete removes key from the index; a missing key is not an
	// error.
	IndexDelete(key []byte) error
	// IndexCount returns the number of keys in the index.
	IndexCount() uint64
	// IndexScan calls fn for index entries in key order, starting at the
	// first key strictly greater than after (from the first key when after
	// is nil).
	IndexScan(after []byte, fn func(k, v []byte) (bool, error)) error

	// Append stores rec at the next offset and returns that offset.
	// Offsets start at 1 and are never reused, even after trimming.
	Append(rec []byte) (uint64, error)
	// Record returns the record at off, or nil.
	Record(off uint64) []byte
	// Records calls fn for each record from offset from (inclusive) in
	// offset order.
	Records(from uint64, fn func(off uint64, rec []byte) (bool, error)) error
	// FirstOffset and LastOffset return the smallest and largest retained
	// offsets, 0 when the journal holds no record.
	FirstOffset() uint64
	LastOffset() uint64
	// NextOffset returns the offset the next Append will assign.
	NextOffset() uint64
	// JournalBytes returns the total size of the retained records, in
	// bytes.
	JournalBytes() uint64
	// DeleteRecords removes records in offset order, oldest first, while
	// their offset is below before, fewer than max were removed, the
	// removed ones total less than maxBytes (0: no bound; at least one is
	// removed), and the retained size is above minBytes. It returns how
	// many it removed and their total size in bytes. Before removing a
	// record it calls each (when not nil) with the record's offset and
	// bytes; an error from each stops it and is returned.
	DeleteRecords(before uint64, max int, maxBytes int64, minBytes uint64, each func(off uint64, rec []byte) error) (n int, size int64, err error)

	// SeenClear empties the seen set of an unordered relist.
	SeenClear() error
	// SeenPut records key as listed by the relist in progress.
	SeenPut(key []byte) error
	// SeenHas reports whether key was recorded by SeenPut.
	SeenHas(key []byte) bool

	// Consumer returns the committed offset of the named consumer and
	// whether it exists.
	Consumer(name string) (uint64, bool)
	// SetConsumer stores the committed offset of the named consumer.
	SetConsumer(name string, off uint64) error
	// DeleteConsumer removes the named consumer.
	DeleteConsumer(name string) error
	// Consumers calls fn for every consumer in name order, until fn
	// returns an error.
	Consumers(fn func(name string, off uint64) error) error

	// HasObjects reports whether the file keeps objects: whether the
	// objects bucket exists.
	HasObjects() bool
	// CreateObjects makes the file keep objects from this transaction on.
	CreateObjects() error
	// ObjectGet returns key's object, nil when there is none.
	ObjectGet(key []byte) []byte
	// ObjectPut stores key's object; without the bucket it does nothing.
	ObjectPut(key, obj []byte) error
	// ObjectDelete removes key's object; an absent key or bucket is no
	// error.
	ObjectDelete(key []byte) error
	// ObjectScan calls fn for each index key that starts with prefix, in
	// key order, with its index value and its entry in the objects bucket
	// (nil when the key has none), walking both side by side.
	ObjectScan(prefix []byte, fn func(k, index, obj []byte) (bool, error)) error
	// ObjectKeys calls fn with every key of the objects bucket, in key
	// order, until fn returns an error.
	ObjectKeys(fn func(k []byte) error) error

	// Derived buckets hold data package journal derives from the objects
	// and keeps in step with them in the same transaction (its secondary
	// indexes, "idx/<name>"). A bucket's name must start with "idx/" (else
	// the write methods return an error and DerivedGet nil); the store
	// creates it on the first DerivedPut.

	// DerivedGet returns k's value in the bucket, nil when either is
	// absent.
	DerivedGet(bucket string, k []byte) []byte
	// DerivedPut sets k's value in the bucket, creating the bucket.
	DerivedPut(bucket string, k, v []byte) error
	// DerivedDelete removes k from the bucket; an absent key or bucket is
	// no error.
	DerivedDelete(bucket string, k []byte) error
	// DerivedScan calls fn for the bucket's entries whose keys start with
	// prefix, in key order (nothing when the bucket is absent).
	DerivedScan(bucket string, prefix []byte, fn func(k, v []byte) (bool, error)) error
	// DropDerived deletes the bucket and all its entries; an absent
	// bucket is no error.
	DropDerived(bucket string) error
}

// Errors of opening a file. Package journal re-exports them as its own.
var (
	// ErrLocked: another writer holds the file's lock past the timeout.
	ErrLocked = errors.New("journal: database file is locked by another process")
	// ErrForeign: the file is a database not written by watchjournal.
	ErrForeign = errors.New("journal: not a watchjournal database")
	// ErrNewerSchema: the file was written by a newer watchjournal.
	ErrNewerSchema = errors.New("journal: database schema is newer than this build")
	// ErrCorrupt: the file is not a readable database (corrupt, truncated,
	// or of another format), or a page read in a transaction is damaged.
	ErrCorrupt = errors.New("journal: not a readable database file (corrupt, truncated, or not bbolt)")
	// ErrNotExist: a read-only open of a file that does not exist.
	ErrNotExist = errors.New("journal: database file does not exist")
)

// Errors of transactions.
var (
	// ErrReadOnly: a write to a store opened read-only.
	ErrReadOnly = errors.New("journal: database opened read-only")
	// ErrNoSpace: a commit failed because the filesystem is full; the
	// transaction is rolled back whole.
	ErrNoSpace = errors.New("journal: no space left on device")
	// ErrClosed: a transaction after Close.
	ErrClosed = errors.New("journal: closed")
)
