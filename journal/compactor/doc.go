// Package compactor keeps a journal bounded: retention by event count,
// payload bytes and age, in small background transactions, and offline
// rewriting of the file to give space back to the filesystem.
//
// # Retention and consumers
//
// Retention never drops an event that a registered consumer has not
// committed, unless the journal's payload exceeds Policy.HardMaxBytes; then
// it trims down to the hard cap whatever the consumers' positions. A
// consumer whose position falls below the first retained offset gets a
// *journal.TrimmedError on its next read, never a silent skip (the model
// is etcd's ErrCompacted); it resynchronizes from journal.Snapshot.
//
// # File size
//
// bbolt never shrinks a file: trimmed pages go to its freelist and are
// reused by later appends, so a journal under retention stops growing but
// does not get smaller. Rewrite rewrites it offline (journal/bolt's
// Rewrite: bbolt's own compaction, then the rename over the file and its
// fsyncs) and reports the space won; CompactFile writes the compacted copy
// alone.
package compactor
