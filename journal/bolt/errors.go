package bolt

import "errors"

// Errors returned by Open.
var (
	// ErrLocked is returned when another process (or another Store in this
	// process) holds the file's lock for longer than Options.Timeout.
	ErrLocked = errors.New("bolt: database file is locked by another process")

	// ErrForeign is returned when the file is a valid bbolt database that was
	// not written by watchjournal (no magic in its meta bucket).
	ErrForeign = errors.New("bolt: not a watchjournal database")

	// ErrNewerSchema is returned when the file was written by a newer
	// watchjournal whose schema version this build does not know.
	ErrNewerSchema = errors.New("bolt: database schema is newer than this build")

	// ErrCorrupt is returned when the file is not a bbolt database, is
	// truncated, or fails bbolt's checksums.
	ErrCorrupt = errors.New("bolt: not a readable database file (corrupt, truncated, or not bbolt)")

	// ErrNotExist is returned by a read-only Open of a file that does not exist.
	ErrNotExist = errors.New("bolt: database file does not exist")
)

// Errors returned by transactions.
var (
	// ErrReadOnly is returned when a write is attempted on a read-only store.
	ErrReadOnly = errors.New("bolt: database opened read-only")

	// ErrNoSpace is returned when a commit fails because the filesystem is
	// full. The transaction is rolled back; nothing of it is kept.
	ErrNoSpace = errors.New("bolt: no space left on device")

	// ErrClosed is returned by any read or write after Close.
	ErrClosed = errors.New("journal: closed")
)
