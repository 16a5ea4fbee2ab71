package journal

// Reading and writing.
//
// Journal is the reader's API, with the settings a user chooses
// (SetRetention, KeepObjects). The writer's machinery (write
// transactions, the staged relist, retention trimming, Reshard) is this
// package's code but not its API: a program that reads and
// consumes a journal needs none of it, and writes one by running a
// reconcile.Loop (one writer per file). The packages of this module that
// write a file (reconcile, compactor, shards, journalctl) reach it through
// package internal/journalwrite: journalwrite.Of(j) returns j's *writer,
// through the hook in internal/journalhook that init sets below.
// journalwrite.Writer documents the write side as its callers see it; the
// methods here (tx.go, relist.go, meta.go, shard.go, consumer.go's Trim,
// resource.go's SetKind) say what each does in full.
//
// The types the writer's methods take and return (a transaction, a
// relist, a meta namespace, a Reshard's result) are aliases of type
// literals, here and in journalwrite alike: two identical type literals are
// one type in Go, so *writer implements journalwrite.Writer without either
// package naming a type of the other's. The two copies must stay the same;
// a difference fails journalwrite.Of's type assertion in every test that
// writes a journal (internal/journalwrite's own first).

import (
	"github.com/watchjournal/watchjournal/internal/hashrange"
	"github.com/watchjournal/watchjournal/internal/journalhook"
)

func init() {
	journalhook.Writer = func(j any) any { return j.(*Journal).writer() }
}

// writer is a journal's write side (journalwrite.Writer). One writer per
// file: the file's exclusive lock keeps every other process out, and
// within the process one reconcile.Loop appends the events (a compactor
// beside it only trims). Its methods return ErrReadOnly on a journal opened
// read-only.
type writer struct{ j *Journal }

// writer returns j's write side.
func (j *Journal) writer() *writer { return &writer{j: j} }

// txAPI is a write transaction as the writer's callers see it
// (journalwrite.Tx); *wtx implements it (tx.go).
type txAPI = interface {
	Lookup(key string) (IndexEntry, bool, error)
	Append(e *Event) (uint64, error)
	SetResourceVersion(rv string) error
	ResourceVersion() string
}

// relistAPI is a relist as the writer's callers see it
// (journalwrite.Relist); *relist implements it (relist.go).
type relistAPI = interface {
	Stage(evs []Event) error
	Staged() int
	MarkSeen(keys []string) error
	Unseen(entries []IndexEntry) ([]IndexEntry, error)
	Commit(rv string) (first, last uint64, err error)
	Abort() error
}

// metaAPI is one namespace of the file's meta entries
// (journalwrite.Meta); *metaNS implements it (meta.go).
type metaAPI = interface {
	Get(key string) ([]byte, error)
	Put(key string, v []byte) error
}

// reshardResult is what a Reshard did; journalwrite.ReshardResult says
// what each field holds.
type reshardResult = struct {
	Left        int
	Entered     hashrange.Set
	First, Last uint64
}
