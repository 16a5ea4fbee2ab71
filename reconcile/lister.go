package reconcile

// The listers: one list, three ways to read it.
//
// A lister reads one complete list from the apiserver and hands it over in
// ordered batches, in the order the server serves them (key order, for
// etcd-backed resources: list.go says what happens when it is not), to the
// relist consumer (relist.go), the same for every lister; which lister
// runs, and what a failure leads to, is the list state's (list.go).
//
//	streamLister  a streaming list (KEP-3157): one watch request with
//	              sendInitialEvents; batches of PageSize objects or
//	              fillBytes; its connection goes on as the watch (stream.go)
//	pageLister    a paginated list (limit/continue): one batch a page,
//	              metadata only for a relist, with a full read of a page
//	              that holds changes (pages.go)
//	fullLister    the first paginated list of an empty index: each page
//	              read once, in full; every object is an ADDED (listfull.go)
//
// A lister never restarts itself. What asks for another list (an expired
// continue token: errSnapshotGone; pages out of key order: errUnordered; a
// server without metadata-only lists: errFullPages; a refused streaming
// list: errNoStreaming) comes back as its error, and the list state returns
// the list that follows (list.go, listFailed).

import (
	"context"
	"errors"

	"github.com/watchjournal/watchjournal/journal"
)

// lister reads one complete list.
type lister interface {
	// each reads the list to its end and calls fn with each batch, in
	// order; it returns the list's resourceVersion once the list is
	// complete. An error of fn ends the read and is returned as it is.
	each(ctx context.Context, fn func(batch) error) (rv string, err error)
}

// batch is part of a list, as a lister hands it over.
type batch struct {
	// items are the batch's objects in the order served, of this shard
	// only (shard.go).
	items []Item
	// rv is the resourceVersion the batch was read at: the reasons of its
	// DELETEDs are looked up there (reason.go). Empty while the list's is
	// not known yet (a streaming list's, before its bookmark): then at the
	// server's current state.
	rv string
	// stage, when set, completes the objects of evs (the diff of items)
	// and stages them, in order, through stage: a metadata page reads the
	// page again in full (pages.go). Nil: the items carry their objects
	// (a streaming list's protobuf ones as sent, wire.go), and evs are
	// staged as they are.
	stage func(ctx context.Context, evs []journal.Event, stage func([]journal.Event) error) error
}

// batcher gathers a lister's items into batches and hands each to fn once
// it holds max objects or fillBytes of objects, whichever fills first (one
// object more when one is larger).
type batcher struct {
	fn    func(batch) error
	max   int
	items []Item
	held  int // bytes of the items' objects
}

// add adds it, and hands the batch over when it is full.
func (b *batcher) add(it Item) error {
	b.items = append(b.items, it)
	b.held += len(it.Object)
	if len(b.items) < b.max && b.held < fillBytes {
		return nil
	}
	return b.flush()
}

// flush hands over the items gathered, if any.
func (b *batcher) flush() error {
	if len(b.items) == 0 {
		return nil
	}
	err := b.fn(batch{items: b.items})
	clear(b.items)
	b.items, b.held = b.items[:0], 0
	return err
}

// What a lister returns when the list must start again in another way
// (list.go, listFailed says which list follows).
var (
	// errSnapshotGone: the list's snapshot is no longer served (a continue
	// token expired with 410, or a page read again in full differs from
	// its metadata page): the list starts again from its first page.
	errSnapshotGone = errors.New("reconcile: the list's snapshot is gone (continue token expired)")
	// errUnordered: a page or batch broke key order: the list starts
	// again and finds deletions by lookup (diffLookup).
	errUnordered = errors.New("reconcile: list not in key order")
	// errFullPages: the server answered a metadata-only list with full
	// objects (or 406): the list starts again with full pages.
	errFullPages = errors.New("reconcile: the apiserver serves no metadata-only lists")
)
