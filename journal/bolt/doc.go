// Package bolt is watchjournal's storage: one bbolt file holding the index,
// the journal, the metadata, the keys seen by an unordered relist, and the
// consumers' committed offsets. (A relist's events wait outside it, in a
// sibling file that package journal writes: see journal/stagefile.go.)
//
// It deals in plain types only (byte keys, uint64 offsets, encoded records),
// so that package journal, which owns the encodings and the guarantees, can
// import it without a cycle. It is the shape of hashicorp/raft-boltdb: a thin
// layer that names the buckets and keeps their key formats in one place.
//
// # Layout
//
//	meta       name → value     (schema version, magic, resource, RV, next offset, …)
//	index      key  → value     key is exactly <namespace>/<name>, or <name> when cluster-scoped
//	journal    offset → record  offset is 8-byte big-endian, from 1, never reused
//	seen       key → empty      keys listed by an unordered relist
//	consumers  name → offset    8-byte big-endian committed offset
//
// # Caveats
//
// Byte slices handed to callbacks point into the memory map and are valid only
// until the transaction ends: copy what you keep. bbolt takes an exclusive
// flock for a writable open and a shared one for a read-only open, so a
// read-only open waits (up to Options.Timeout) while a writer holds the file.
// A writable Store also holds an exclusive flock on <path>.lock from Open
// to Close (lock.go): it closes and reopens the database after every 4,096
// page allocations, at most once a second, to give back bbolt's per-page
// bookkeeping (refresh.go), and bbolt's lock is released for that moment,
// but the writer's is not, so no other writer gets in (storage.ErrLocked).
package bolt
