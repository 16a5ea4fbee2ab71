// Package journalwrite is the write side of a journal.Journal, for the
// packages of this module that write a journal file: reconcile (the
// events, the relist, the objects' kind, its list mode), compactor
// (retention trimming), shards (Reshard and the pending ranges) and
// journalctl (compact's lock); tests and tools that write a file by hand
// use it too. A program that reads and consumes a journal needs none of
// it, so package journal keeps it out of its API and this
// package, under the module's internal/, names it.
//
// Of(j) returns the Writer of an open journal. The implementation is
// package journal's, reached through internal/journalhook: journal/tx.go
// (Update, Tx), relist.go and stagefile.go (BeginRelist, Relist), meta.go
// (Meta), shard.go and reshard.go (Reshard, the pending ranges),
// consumer.go (Trim) and resource.go (SetKind). Their doc comments say
// what each method does in full; the comments here say what a caller
// needs.
//
// Tx, Relist, Meta and ReshardResult are aliases of type literals, and
// package journal declares aliases of the same literals (journal/write.go):
// identical literals are one type, so journal's writer implements Writer
// while neither package names a type of the other's. Change both together.
package journalwrite

import (
	"time"

	"github.com/watchjournal/watchjournal/internal/hashrange"
	"github.com/watchjournal/watchjournal/internal/journalhook"
	"github.com/watchjournal/watchjournal/journal"
	"github.com/watchjournal/watchjournal/journal/bolt"
)

// Writer is a journal's write side. One writer per file: the file's
// exclusive lock keeps every other process out, and within the process
// one reconcile.Loop appends the events (a compactor beside it only
// trims). Two writers of events in one process would each keep the
// journal consistent per transaction, but would race each other's
// resourceVersions. Its methods return journal.ErrReadOnly on a journal
// opened read-only.
type Writer interface {
	// Update runs fn in one write transaction, committed when fn returns
	// nil (journal/tx.go).
	Update(fn func(Tx) error) error
	// BeginRelist starts a relist, first finishing a commit an earlier
	// Relist began and could not complete (journal/relist.go).
	BeginRelist() (Relist, error)
	// Trim deletes at most max events and about maxBytes (0: no bound)
	// below before, oldest first, while the retained size is above
	// minBytes (journal/consumer.go).
	Trim(before uint64, max int, maxBytes int64, minBytes uint64) (n int, size int64, err error)
	// TrimRetained is Trim below every consumer's first uncommitted
	// event, read in the same transaction (journal/consumer.go).
	TrimRetained(before uint64, max int, maxBytes int64, minBytes uint64) (n int, size int64, err error)
	// SetKind records the kind and apiVersion of the resource's objects
	// if the file records none yet (journal/resource.go).
	SetKind(kind, apiVersion string) error
	// Meta returns the meta entries of namespace ns, which must be
	// non-empty and hold no dot (else it panics): entry key of ns is
	// stored as "ns.key" (journal/meta.go).
	Meta(ns string) Meta
	// Reshard binds the file to the shard selector sel (KEP-5866 syntax,
	// "" unbinds), journaling the keys that leave as DELETED, reason moved
	// (journal/shard.go).
	Reshard(sel string) (ReshardResult, error)
	// ShardPending returns the hash ranges a Reshard added whose keys no
	// list has journaled yet (empty when none): the next list journals
	// its ADDEDs for keys in them as moved.
	ShardPending() (hashrange.Set, error)
	// MarkShardPending adds s to the pending ranges, for a shard member
	// that joins a group with an empty file whose range others held.
	MarkShardPending(s hashrange.Set) error
	// ClearShardPending forgets the pending ranges, once a list at the
	// new range has committed.
	ClearShardPending() error
}

// Tx is a write transaction, valid only inside the function given to
// Writer.Update (journal/tx.go).
type Tx = interface {
	// Lookup returns the index entry for key as this transaction sees it.
	Lookup(key string) (journal.IndexEntry, bool, error)
	// Append assigns e the next offset, stores it, applies it to the
	// index and returns the offset (journal/tx.go).
	Append(e *journal.Event) (uint64, error)
	// SetResourceVersion records rv as the last synced resourceVersion,
	// the point a watch resumes from.
	SetResourceVersion(rv string) error
	// ResourceVersion returns the last synced resourceVersion as this
	// transaction sees it.
	ResourceVersion() string
}

// Relist stages the events a relist infers until the list is complete
// (journal/relist.go). Not safe for concurrent use; one Relist at a time
// per journal.
type Relist = interface {
	// Stage appends evs, in order; an event's Offset is ignored and a
	// zero Time is set now. A full disk gives journal.ErrNoSpace.
	Stage(evs []journal.Event) error
	// Staged returns how many events have been staged.
	Staged() int
	// MarkSeen records keys as listed, for a relist whose pages did not
	// come in key order.
	MarkSeen(keys []string) error
	// Unseen returns the entries whose keys MarkSeen did not record.
	Unseen(entries []journal.IndexEntry) ([]journal.IndexEntry, error)
	// Commit makes the staged events visible and records rv as the last
	// synced resourceVersion; first and last are the offsets of the
	// events committed (0 when none).
	Commit(rv string) (first, last uint64, err error)
	// Abort discards what was staged.
	Abort() error
}

// Meta is one namespace of the file's meta entries, for a package that
// keeps a small setting in the file beside the journal (journal/meta.go).
// Each Get and Put is a transaction of its own.
type Meta = interface {
	// Get returns the value of the entry key, or nil when it is not set;
	// a read that fails is an error, never "not set".
	Get(key string) ([]byte, error)
	// Put sets the entry key to v; a nil v deletes it.
	Put(key string, v []byte) error
}

// ReshardResult is what a Reshard did.
type ReshardResult = struct {
	// Left is how many keys left the range, each journaled as DELETED
	// with reason moved.
	Left int
	// Entered is the part of the hash space the range gained, empty when
	// it only shrank; its keys arrive with the next list.
	Entered hashrange.Set
	// First and Last are the offsets of the DELETED events, 0 when none.
	First, Last uint64
}

// Of returns the write side of j. Every call returns a writer of the same
// file: the one-writer rule (Writer) is the caller's.
func Of(j *journal.Journal) Writer {
	return journalhook.Writer(j).(Writer)
}

// ShardSet returns the hash ranges a shard selector selects: the whole
// space for "" (unsharded). Errors match hashrange.ErrSyntax.
func ShardSet(selector string) (hashrange.Set, error) {
	if selector == "" {
		return hashrange.Full(), nil
	}
	return hashrange.Parse(selector)
}

// LockWriter takes the writer's lock of the journal file at path without
// opening it, for a tool that replaces the file whole (journalctl compact's
// rewrite): while it is held, journal.Open of the file for writing fails
// with journal.ErrLocked, and a writer that runs is kept out even in the
// moment it reopens its file to give back the store's page bookkeeping.
// The lock is the file <path>.lock; it is tried for timeout (once when
// timeout is shorter than 50 ms).
//
// Errors: journal.ErrLocked when a writer holds the file, or the file
// system's (the directory must be writable). release drops the lock;
// calls after the first do nothing.
func LockWriter(path string, timeout time.Duration) (release func(), err error) {
	return bolt.LockWriter(path, timeout)
}
