package journal

import (
	"errors"
	"fmt"

	"github.com/watchjournal/watchjournal/internal/storage"
	"github.com/watchjournal/watchjournal/journal/internal/storedobj"
)

// Errors returned by Open. They match with errors.Is; the returned error
// wraps them with the path and cause.
var (
	// ErrLocked is returned when another writer holds the file (its lock,
	// <path>.lock, or the file's own) for longer than Options.Timeout.
	ErrLocked = storage.ErrLocked
	// ErrForeign is returned for a database file not written by
	// watchjournal.
	ErrForeign = storage.ErrForeign
	// ErrNewerSchema is returned for a file written by a newer watchjournal.
	ErrNewerSchema = storage.ErrNewerSchema
	// ErrCorrupt is returned for a file that is not a readable journal
	// file (corrupt, truncated, or of another format), and by a read or
	// write that meets a damaged page of the file.
	ErrCorrupt = storage.ErrCorrupt
	// ErrNotExist is returned by a read-only Open of a missing file.
	ErrNotExist = storage.ErrNotExist
	// ErrReadOnly is returned by writes to a journal opened read-only.
	ErrReadOnly = storage.ErrReadOnly
	// ErrNoSpace is returned by a write that failed because the disk is
	// full; the write is rolled back whole.
	ErrNoSpace = storage.ErrNoSpace
	// ErrResourceMismatch is returned by Open when Options.Resource differs
	// from the resource the file already records: another GVR, namespace or
	// metadata-only choice, or selectors that differ in canonical form
	// (selector.go), so that select other objects.
	ErrResourceMismatch = errors.New("journal: file records another resource")
)

// Errors returned while reading.
var (
	// ErrTrimmed matches a *TrimmedError: retention trimmed the
	// requested offset.
	ErrTrimmed = errors.New("journal: requested offset was trimmed by retention")
	// ErrBadRecord is returned when a stored record cannot be decoded.
	ErrBadRecord = errors.New("journal: bad record")
	// ErrBadObject is returned when a stored object does not decode as
	// its encoding says (ObjectJSON; journal/cache's decoders), or not into
	// the Go type asked for (a protobuf object of another kind).
	ErrBadObject = storedobj.ErrBadObject
	// ErrClosed is returned by every read, write, Wait and Consumer.Next
	// on a journal after Close (or blocked in them when Close is called).
	ErrClosed = storage.ErrClosed
	// ErrNoKind is returned by TypeMeta when the file records no kind and
	// no retained event carries an object to learn it from.
	ErrNoKind = errors.New("journal: the file records no kind")
)

// Errors of appending an event (the writer, package reconcile) and of
// Consumer.Commit.
var (
	// ErrKeyState matches a *KeyStateError: an event that contradicts the
	// index (journal/doc.go, "Guarantees": no ADDED for a present key, no
	// MODIFIED or DELETED for an absent one).
	ErrKeyState = errors.New("journal: event contradicts the index")
	// ErrBadEvent is returned by the writer's append for an event that is
	// not well-formed: an unknown Type, an empty Key or an empty Origin.
	ErrBadEvent = errors.New("journal: malformed event")
	// ErrCommitBackwards is returned by a Commit below the committed
	// offset; rewinding on purpose is Consumer.Reset.
	ErrCommitBackwards = errors.New("journal: commit below the committed offset")
	// ErrBadMax is returned by Read, TryNext and Next for a negative max.
	ErrBadMax = errors.New("journal: negative max events")
)

// KeyStateError is an event that contradicts the index: Type against a
// key that is present (Present true, with the index's UID) or absent. It
// matches ErrKeyState with errors.Is.
type KeyStateError struct {
	Type    EventType
	Key     string
	Present bool
	// UID is the index's UID for a present key.
	UID string
}

// Error returns the message.
func (e *KeyStateError) Error() string {
	if e.Present {
		return fmt.Sprintf("journal: %s for key %q, which the index holds (uid %s)", e.Type, e.Key, e.UID)
	}
	return fmt.Sprintf("journal: %s for key %q, which the index does not hold", e.Type, e.Key)
}

// Is reports whether target is ErrKeyState.
func (e *KeyStateError) Is(target error) bool { return target == ErrKeyState }

// TrimmedError is returned when a read asks for an offset below the first
// retained offset: retention has trimmed the events in between. It follows
// etcd's ErrCompacted (clientv3 WatchResponse.CompactRevision). It matches
// ErrTrimmed with errors.Is.
type TrimmedError struct {
	// Requested is the offset that was asked for.
	Requested uint64
	// First is the first offset still retained.
	First uint64
}

// Error returns the message, with both offsets.
func (e *TrimmedError) Error() string {
	return fmt.Sprintf("journal: offset %d was trimmed by retention, first retained offset is %d", e.Requested, e.First)
}

// Is reports whether target is ErrTrimmed.
func (e *TrimmedError) Is(target error) bool { return target == ErrTrimmed }
