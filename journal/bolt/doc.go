// Package bolt is watchjournal's storage: the one implementation, over a
// bbolt file, of the storage interface package journal owns
// (internal/storage: Store and Tx), as hashicorp/raft-boltdb implements
// raft's LogStore and StableStore. The file holds the index, the journal,
// the metadata, the keys seen by an unordered relist, the consumers'
// committed offsets and, when kept, the objects retention trimmed. (A
// relist's events wait outside it, in a sibling file that package journal
// writes: see journal/stagefile.go.)
//
// It exports its constructor (Open, Options), the schema version it
// writes, the writer's lock (LockWriter) and the offline file rewrite
// (Compact, Rewrite, RewriteOptions: compact.go); everything else is
// reached through the interface. It deals
// in plain types only (byte keys, uint64 offsets, encoded records), so
// that package journal, which owns the encodings and the guarantees, can
// import it; it names the buckets and keeps their key formats in one place.
//
// # Layout
//
//	meta       name → value     (schema version, magic, resource, RV, next offset, …)
//	index      key  → value     key is exactly <namespace>/<name>, or <name> when cluster-scoped
//	journal    offset → record  offset is 8-byte big-endian, from 1, never reused
//	seen       key → empty      keys listed by an unordered relist
//	consumers  name → offset    8-byte big-endian committed offset
//	objects    key  → object    only in a file that keeps objects (objects.go)
//	idx/<name> derived entries  a secondary index of package journal's (indexes.go)
//
// # Caveats
//
// Byte slices handed to callbacks point into the memory map and are valid only
// until the transaction ends: copy what you keep. bbolt takes an exclusive
// flock for a writable open and a shared one for a read-only open, so a
// read-only open waits (up to Options.Timeout) while a writer holds the file.
// A writable store also holds an exclusive flock on <path>.lock from Open
// to Close (lock.go): it closes and reopens the database after every 4,096
// page allocations, at most once a second, to give back bbolt's per-page
// bookkeeping (refresh.go), and bbolt's lock is released for that moment,
// but the writer's is not, so no other writer gets in (ErrLocked).
// Every page a read touches stays resident in the process through the
// map; ReleaseMapped drops them (madvise, unmap.go).
package bolt
