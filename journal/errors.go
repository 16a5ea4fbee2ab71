package journal

import (
	"errors"
	"fmt"

	"github.com/watchjournal/watchjournal/journal/bolt"
)

// Errors returned by Open. They match with errors.Is; the returned error
// wraps them with the path and cause.
var (
	// ErrLocked is returned when another writer holds the file.
	ErrLocked = bolt.ErrLocked
	// ErrForeign is returned for a bbolt file not written by watchjournal.
	ErrForeign = bolt.ErrForeign
	// ErrNewerSchema is returned for a file written by a newer watchjournal.
	ErrNewerSchema = bolt.ErrNewerSchema
	// ErrCorrupt is returned for a file that is not a readable bbolt database.
	ErrCorrupt = bolt.ErrCorrupt
	// ErrNotExist is returned by a read-only Open of a missing file.
	ErrNotExist = bolt.ErrNotExist
	// ErrReadOnly is returned by writes to a journal opened read-only.
	ErrReadOnly = bolt.ErrReadOnly
	// ErrNoSpace is returned by a write that failed because the disk is
	// full; the write is rolled back whole.
	ErrNoSpace = bolt.ErrNoSpace
	// ErrResourceMismatch is returned by Open when Options.Resource differs
	// from the resource the file already records: another GVR, namespace or
	// metadata-only choice, or selectors that differ in canonical form
	// (selector.go), so that select other objects.
	ErrResourceMismatch = errors.New("journal: file records another resource")
)

// Errors returned while reading.
var (
	// ErrCompacted matches a *CompactedError.
	ErrCompacted = errors.New("journal: requested offset has been compacted")
	// ErrBadRecord is returned when a stored record cannot be decoded.
	ErrBadRecord = errors.New("journal: bad record")
)

// CompactedError is returned when a read asks for an offset below the first
// retained offset: retention has dropped the events in between. It follows
// etcd's ErrCompacted (clientv3 WatchResponse.CompactRevision). It matches
// ErrCompacted with errors.Is.
type CompactedError struct {
	// Requested is the offset that was asked for.
	Requested uint64
	// First is the first offset still retained.
	First uint64
}

// Error returns the message, with both offsets.
func (e *CompactedError) Error() string {
	return fmt.Sprintf("journal: offset %d has been compacted, first retained offset is %d", e.Requested, e.First)
}

// Is reports whether target is ErrCompacted.
func (e *CompactedError) Is(target error) bool { return target == ErrCompacted }
