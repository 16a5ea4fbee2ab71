package journal

// Conventions of the whole API.
//
//   - Shutdown: a call that runs until its context is done
//     (reconcile.Loop.Run, adapt.Handle, a jcache.ExactSource) returns nil when
//     it ends because the context was cancelled: a clean shutdown is not an
//     error, as for controller-runtime's Runnable.Start and the loop. A call
//     that waits for one thing (Wait, Consumer.Next, a WaitForSync) returns
//     ctx.Err(): its caller did not get what it waited for. An
//     adapt.Watcher closes ResultChan on Stop without an error event.
//   - A journal used after Close (or closed under a blocked call) returns
//     an error matching ErrClosed, from every read, write and wait.
//   - Batch sizes (Read, Consumer.TryNext, Consumer.Next): max 0 means
//     DefaultBatch, a negative max is ErrBadMax.
//   - Commits only move forward: Commit below the committed offset is
//     ErrCommitBackwards; Consumer.Reset rewinds (or skips) on purpose.
//   - The writer appends only well-formed events (ErrBadEvent: a known
//     Type, a Key, an Origin) that agree with the index (ErrKeyState,
//     doc.go's guarantees).
//   - The file records the resource's kind and apiVersion
//     (Resource.Kind, Journal.TypeMeta), so every event, a tombstone
//     included, decodes from the file alone.
//
// Concurrency.
//
// One process writes a file at a time (an exclusive file lock; a second
// writer gets ErrLocked), for the writer's whole life. Within that process
// any number of goroutines may read while the writer runs; reads use short
// read transactions. The writer closes and reopens the file after every
// 4,096 pages it writes (at most once a second), to give back the
// store's per-page bookkeeping (the store's refresh.go); it holds a lock
// of its own, on <path>.lock, across the reopen (the store's lock.go), so
// another writer's Open fails with ErrLocked then too. The lock file
// exists while a writer has the file open.

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/watchjournal/watchjournal/internal/storage"
	"github.com/watchjournal/watchjournal/journal/bolt"
)

// Options configure Open. A nil *Options means the defaults.
type Options struct {
	// ReadOnly opens the file with a shared lock, for inspection. Writes
	// return ErrReadOnly. Note that the file's locks are per file: a
	// read-only open waits while a writer holds the file, and holds the
	// writer off while it is open.
	ReadOnly bool
	// Timeout is how long Open waits for the file lock before it returns
	// ErrLocked. Zero means 1 s; negative means one try.
	Timeout time.Duration
	// Resource, when set on a writable open, is recorded in a new file and
	// checked against an existing one (ErrResourceMismatch on a difference).
	Resource *Resource
	// MigrateSelectors lets a writable Open take a Resource that differs
	// from the file's only in its label or field selector: the file then
	// records the new selectors and forgets its resourceVersion, so the
	// writer's next start relists and journals the difference (keys that
	// leave the selectors as DELETED with reason left-selector; migrate.go).
	// Without it such an Open fails with ErrResourceMismatch.
	MigrateSelectors bool
	// Logger receives the journal's logs (logr, as client-go and
	// controller-runtime): errors it recovers from, through Error. The
	// zero Logger discards.
	Logger logr.Logger
	// NoSync skips fsync on commit: only for tests and benchmarks.
	NoSync bool
	// InitialMmapSize is the initial size of the file's memory map in
	// bytes; zero means the store's default. A read transaction keeps the
	// map from growing, so a larger map avoids blocking the writer behind
	// readers.
	InitialMmapSize int
	// Keyring seals the objects of sensitive resources before they reach
	// the file (AES-256-GCM, seal.go) and opens sealed objects on every
	// read. Nil: nothing is sealed, and a read of a sealed object is a
	// *SealedError (ErrSealed). See LoadKeyring for key files and
	// rotation.
	Keyring *Keyring
	// SealResources extends DefaultSealResources (Secrets): with a Keyring,
	// a file of one of these resources (not MetadataOnly) stores its
	// objects sealed. Without a Keyring, package reconcile refuses to
	// write their objects.
	SealResources []schema.GroupResource

	// hooks are settings only this package's tests set (testhooks.go).
	hooks testHooks
}

// Journal is an open journal file. Its methods read: events by offset,
// the index, objects, the resource and its state. The rest is reached by
// role: Consumers (durable consumers), Indexes (secondary indexes),
// Settings (retention, objects kept, sealing) and Writer (the write side,
// for whoever runs the loop). It is safe for concurrent use by many
// goroutines; writes are serialized.
type Journal struct {
	store  storage.Store
	log    logr.Logger
	noSync bool
	ix     indexSet  // registered index functions (indexes.go)
	seal   *sealer   // seal.go; fixed at Open
	hooks  testHooks // Options.hooks, fixed at Open (testhooks.go)
	// objectsKept: a read transaction saw the objects bucket (ViewObjects);
	// it is never deleted, so later reads need not look again.
	objectsKept atomic.Bool

	mu     sync.Mutex
	notify chan struct{} // closed and replaced after every commit that appends
	closed bool
}

// Meta keys used by this package.
const (
	metaResource = "resource"
	metaRV       = "rv"
	metaRelistRV = "relistRV" // set while a staged relist is being committed
	// metaRelistStage is the stage file's nonce, size and next position
	// (3 × 8 bytes, big-endian), set with metaRelistRV.
	metaRelistStage = "relistStage"
)

// Open opens the journal file at path, creating it (mode 0600) when it does
// not exist and opts is not read-only.
//
// Errors match ErrLocked, ErrNotExist, ErrCorrupt, ErrForeign,
// ErrNewerSchema and ErrResourceMismatch with errors.Is. Selectors are
// compared in canonical form (selector.go): a selector spelled another way
// that selects the same objects is the same resource. Open does not
// validate selectors; reconcile.New does (ErrInvalidSelector). A writable Open
// also finishes a relist commit and a Reshard that a crash interrupted.
func Open(path string, opts *Options) (*Journal, error) {
	var o Options
	if opts != nil {
		o = *opts
	}
	s, err := bolt.Open(path, bolt.Options{
		ReadOnly: o.ReadOnly, Timeout: o.Timeout, NoSync: o.NoSync, InitialMmapSize: o.InitialMmapSize,
	})
	if err != nil {
		return nil, err
	}
	j := &Journal{store: s, log: o.Logger, noSync: o.NoSync, hooks: o.hooks, notify: make(chan struct{})}
	if err := j.init(&o); err != nil {
		_ = s.Close()
		return nil, err
	}
	return j, nil
}

// init binds the file to o.Resource, sets the sealer and, on a writable
// open, finishes what a crash interrupted and migrates the selectors.
func (j *Journal) init(o *Options) error {
	if !o.ReadOnly {
		if err := j.bindResource(o.Resource, o.MigrateSelectors); err != nil {
			return err
		}
	}
	if err := j.initSeal(o); err != nil || o.ReadOnly {
		return err
	}
	if err := j.finishRelist(); err != nil {
		return err
	}
	if _, err := j.finishReshard(); err != nil {
		return err
	}
	if o.MigrateSelectors && o.Resource != nil {
		return j.migrateSelectors(o.Resource) // migrate.go
	}
	return nil
}

func (j *Journal) bindResource(r *Resource, migrate bool) error {
	if r == nil {
		return nil
	}
	return j.store.Update(func(tx storage.Tx) error {
		have, ok, err := decodeResource(tx.Meta(metaResource))
		if err != nil {
			return err
		}
		if !ok {
			return tx.SetMeta(metaResource, r.encode())
		}
		if !have.identity().sameAs(r.identity()) {
			if migrate && onlySelectorsDiffer(have, *r) {
				return nil // Open migrates once a crash's relist is finished (migrate.go)
			}
			return mismatch(have, *r)
		}
		if have.Kind == "" && r.Kind != "" && r.APIVersion != "" {
			have.Kind, have.APIVersion = r.Kind, r.APIVersion
			return tx.SetMeta(metaResource, have.encode())
		}
		return nil
	})
}

// Close closes the file. Blocked Wait calls return an error.
func (j *Journal) Close() error {
	j.mu.Lock()
	if !j.closed {
		j.closed = true
		close(j.notify)
	}
	j.mu.Unlock()
	return j.store.Close()
}

// Path returns the file's path.
func (j *Journal) Path() string { return j.store.Path() }

// Resource returns the resource the file records, and false when none is
// recorded yet. A read that fails is an error, never "none recorded": the
// store's error (ErrCorrupt for a corrupt page, ErrClosed for a closed
// journal), or one matching ErrBadRecord for a record that does not decode.
func (j *Journal) Resource() (Resource, bool, error) {
	var r Resource
	var ok bool
	err := j.store.View(func(tx storage.Tx) (err error) {
		r, ok, err = decodeResource(tx.Meta(metaResource))
		return err
	})
	if err != nil {
		return Resource{}, false, fmt.Errorf("journal: resource: %w", err)
	}
	return r, ok, nil
}

// ResourceVersion returns the last synced resourceVersion: the list's or
// the last watch event's or bookmark's. Empty means never synced.
func (j *Journal) ResourceVersion() (string, error) {
	var rv string
	err := j.store.View(func(tx storage.Tx) error { rv = string(tx.Meta(metaRV)); return nil })
	return rv, err
}

// Lookup returns the index entry for key, and false when key is absent.
func (j *Journal) Lookup(key string) (IndexEntry, bool, error) {
	var e IndexEntry
	var ok bool
	err := j.store.View(func(tx storage.Tx) (err error) {
		e, ok, err = lookup(tx, key)
		return err
	})
	return e, ok, err
}

// ScanIndex returns up to limit index entries in key order whose keys are
// strictly greater than after ("" starts at the first key). Each call is one
// short read transaction; page through the index by passing the last key
// returned.
func (j *Journal) ScanIndex(after string, limit int) ([]IndexEntry, error) {
	var out []IndexEntry
	var start []byte
	if after != "" {
		start = []byte(after)
	}
	err := j.store.View(func(tx storage.Tx) error {
		return tx.IndexScan(start, func(k, v []byte) (bool, error) {
			e, err := decodeIndex(k, v)
			if err != nil {
				return false, err
			}
			out = append(out, e)
			return len(out) < limit, nil
		})
	})
	return out, err
}

// readBytes bounds the records one Read decodes: with large objects, max
// events could otherwise hold gigabytes.
const readBytes = 4 << 20

// DefaultBatch is the number of events a read takes at most when it is
// asked for max 0 (Read, Consumer.TryNext, Consumer.Next, and the adapters).
const DefaultBatch = 256

// Read returns up to max events from offset from (inclusive) in offset
// order, and stops after the event that takes the records read past 4 MiB,
// so a read holds bounded memory whatever the objects' size: fewer than max
// events does not mean the head; none does. max 0 means DefaultBatch; a
// negative max is ErrBadMax. from 0 means the first retained offset. It
// returns a *TrimmedError when from is below the first retained offset,
// and ErrClosed after Close.
func (j *Journal) Read(from uint64, max int) ([]Event, error) {
	if max < 0 {
		return nil, fmt.Errorf("%w: %d", ErrBadMax, max)
	}
	if max == 0 {
		max = DefaultBatch
	}
	var out []Event
	err := j.store.View(func(tx storage.Tx) error {
		first := firstRetained(tx)
		if from == 0 {
			from = first
		}
		if from < first {
			return &TrimmedError{Requested: from, First: first}
		}
		size := 0
		return tx.Records(from, func(off uint64, rec []byte) (bool, error) {
			e, err := decodeEvent(off, rec)
			if err == nil {
				err = j.seal.openEvent(&e)
			}
			if err != nil {
				return false, err
			}
			out = append(out, e)
			size += len(rec)
			return len(out) < max && size < readBytes, nil
		})
	})
	return out, err
}

// firstRetained returns the first retained offset, or the next offset to
// be assigned when the journal holds no event.
func firstRetained(tx storage.Tx) uint64 {
	if first := tx.FirstOffset(); first != 0 {
		return first
	}
	return tx.NextOffset()
}

// Head returns the last offset assigned, 0 when none ever was.
func (j *Journal) Head() (uint64, error) {
	var h uint64
	err := j.store.View(func(tx storage.Tx) error { h = tx.NextOffset() - 1; return nil })
	return h, err
}

// Wait blocks until the journal's head is past offset after, ctx is done
// (ctx.Err()), or the journal is closed (ErrClosed). Writers in this process wake it;
// it does not poll.
func (j *Journal) Wait(ctx context.Context, after uint64) error {
	for {
		j.mu.Lock()
		ch, closed := j.notify, j.closed
		j.mu.Unlock()
		if closed {
			return ErrClosed
		}
		head, err := j.Head()
		if err != nil {
			return err
		}
		if head > after {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-ch:
		}
	}
}

func (j *Journal) wake() {
	j.mu.Lock()
	if !j.closed {
		close(j.notify)
		j.notify = make(chan struct{})
	}
	j.mu.Unlock()
}

// ReleaseMapped gives back the process's resident pages of the file:
// the store reads it through a memory map, and every page a read touches
// stays resident (RSS, as file-backed pages) until the kernel reclaims it,
// so a reader that walked every object leaves the whole file resident.
// The pages stay in the page cache (a cgroup counts them until they are
// reclaimed; the kubelet's working set, usage less inactive file pages,
// drops as they age); the next read of a page faults it in again. It
// returns how many bytes of the file it covered, 0 where the platform
// has no madvise. Errors: ErrClosed. See journal/bolt/unmap.go.
func (s Settings) ReleaseMapped() (int64, error) { return s.j.store.ReleaseMapped() }

// Stats describes a journal file at one moment (one read transaction).
type Stats struct {
	// Resource is the watched resource, zero when none is recorded.
	Resource Resource
	// Objects is the number of keys in the index.
	Objects uint64
	// FirstOffset and LastOffset bound the retained events, inclusive;
	// both are 0 when the journal holds no event.
	FirstOffset, LastOffset uint64
	// ResourceVersion is the last synced resourceVersion.
	ResourceVersion string
	// FileSize is the file's size on disk in bytes; it grows with the
	// journal and never shrinks by itself (see compactor.CompactFile).
	FileSize int64
	// Consumers maps each durable consumer's name to its committed offset.
	Consumers map[string]uint64
	// JournalBytes is the size of the retained events as stored, in bytes.
	JournalBytes uint64
}

// Stats returns the file's statistics, read in one transaction.
func (j *Journal) Stats() (Stats, error) {
	var s Stats
	err := j.store.View(func(tx storage.Tx) error {
		s.Resource, _, _ = decodeResource(tx.Meta(metaResource))
		s.Objects = tx.IndexCount()
		s.FirstOffset, s.LastOffset = tx.FirstOffset(), tx.LastOffset()
		s.ResourceVersion = string(tx.Meta(metaRV))
		s.JournalBytes = tx.JournalBytes()
		s.Consumers = map[string]uint64{}
		return tx.Consumers(func(name string, off uint64) error { s.Consumers[name] = off; return nil })
	})
	s.FileSize = j.store.Size()
	return s, err
}
