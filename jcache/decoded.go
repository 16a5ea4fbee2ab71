package jcache

// Objects decoded at write time, handed to the handlers.
//
// An informer with an index on disk (diskindex.go) decodes every object
// the writer stores, to call the index function; a handler then decodes
// the same stored bytes again when it is given the event (dispatch): two
// decodes of every event where one does. So the index function leaves the
// object it decoded here, keyed by the stored bytes, and the handler's
// decode of identical bytes takes it instead of decoding (decode is a
// function of the bytes and the transform, so the object is the same;
// handlers share it as client-go's handlers and indexers share the
// store's object, read-only).
//
// Where it applies: events that reach a registered handler (watch events,
// a relist's events). Not a first start's list under controller-runtime:
// the manager starts the controllers, which add their handlers, only
// after the cache synced, so the listed objects reach the handler by the
// replay from disk (a decode of its own), after the list was committed.
//
// Bounded: at most decodedMax objects (decodedObjects.max in tests), the
// oldest dropped first; an
// object is taken once (a second handler decodes its own); everything
// left is dropped when a handler reaches the journal's head (what it did
// not take by then it will not take) and when the informer has no
// handler (nobody would take it). A miss costs the decode it saved,
// nothing else.

import (
	"bytes"
	"hash/maphash"
	"sync"

	"k8s.io/apimachinery/pkg/runtime"
)

// decodedMax bounds the objects an informer holds.
const decodedMax = 1024

var decodedSeed = maphash.MakeSeed()

type decodedEntry struct {
	b []byte // the stored bytes, copied
	o runtime.Object
}

// decodedObjects is an informer's objects decoded by its index functions
// and not yet taken.
type decodedObjects struct {
	max int // the bound; 0: decodedMax (set by tests before any put)

	mu    sync.Mutex
	m     map[uint64]decodedEntry
	order []uint64 // insertion order, for dropping the oldest
}

// put keeps o, decoded from b.
func (d *decodedObjects) put(b []byte, o runtime.Object) {
	h := maphash.Bytes(decodedSeed, b)
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.m == nil {
		d.m = map[uint64]decodedEntry{}
	}
	limit := d.max
	if limit <= 0 {
		limit = decodedMax
	}
	for len(d.order) >= limit {
		delete(d.m, d.order[0])
		d.order = d.order[1:]
	}
	if _, ok := d.m[h]; !ok {
		d.order = append(d.order, h)
	}
	d.m[h] = decodedEntry{b: bytes.Clone(b), o: o}
}

// take returns the object decoded from bytes equal to b, and forgets it;
// nil when none is held.
func (d *decodedObjects) take(b []byte) runtime.Object {
	d.mu.Lock()
	defer d.mu.Unlock()
	if len(d.m) == 0 {
		return nil
	}
	h := maphash.Bytes(decodedSeed, b)
	e, ok := d.m[h]
	if !ok || !bytes.Equal(e.b, b) {
		return nil
	}
	delete(d.m, h) // its place in order is skipped when dropped
	return e.o
}

// clear drops every object held.
func (d *decodedObjects) clear() {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.m, d.order = nil, nil
}
