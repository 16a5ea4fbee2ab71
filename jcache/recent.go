package jcache

// Objects recently given to handlers, for the Gets that follow them.
//
// A controller's reconcile usually Gets the object whose event its
// handler was just given; a Get decodes the stored object afresh
// (indexer.go), which is about half of its time for JSON. So dispatch keeps,
// per key, the object it decoded for the handler with the stored bytes
// it was decoded from, and a Get whose read transaction finds the same
// bytes under the key returns a deep copy of that object instead of
// decoding (decode is a function of the bytes; a deep copy, which shares
// strings, costs a fraction of a decode: what controller-runtime's cache
// does on every Get). The check is the bytes themselves, compared in the
// Get's transaction, so an entry can never be stale: a changed or
// deleted object has other bytes, or none. The object is shared with the
// handlers as client-go's informers share their store's objects with
// theirs: read-only, never handed out itself.
//
// Only objects stored as JSON (custom resources, and every kind read as
// JSON) are kept: decoding a built-in kind's protobuf costs what a deep
// copy costs, so keeping those would save nothing.
//
// Bounded: at most recentMax objects and recentMaxBytes of their stored
// bytes (an object larger than a quarter of that is not kept), the
// oldest put dropped first: per informer, 2 MiB of stored bytes plus
// their decoded objects, flat in the number of objects. A Get of a key
// not recently given to a handler costs one map lookup.

import (
	"bytes"
	"sync"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"

	jc "github.com/watchjournal/watchjournal/journal/cache"
)

// recentMax bounds the objects an informer keeps, recentMaxBytes their
// stored bytes.
const (
	recentMax      = 512
	recentMaxBytes = 2 << 20
)

type recentEntry struct {
	b   []byte // the stored bytes, copied
	o   runtime.Object
	seq uint64 // of its put
}

// recentPut is one put, in order.
type recentPut struct {
	key string
	seq uint64
}

// recentObjects are an informer's objects recently given to handlers,
// by key.
type recentObjects struct {
	mu    sync.Mutex
	m     map[string]recentEntry
	order []recentPut // puts, oldest first; a put whose key was put again since is stale
	seq   uint64
	bytes int // of the entries' b
}

// put keeps o, decoded from the stored bytes b of key.
func (r *recentObjects) put(key string, b []byte, o runtime.Object) {
	if len(b) == 0 || len(b) > recentMaxBytes/4 || jc.IsProtobuf(b) {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.m == nil {
		r.m = map[string]recentEntry{}
	}
	if old, ok := r.m[key]; ok {
		r.bytes -= len(old.b)
	}
	r.seq++
	r.m[key] = recentEntry{b: bytes.Clone(b), o: o, seq: r.seq}
	r.bytes += len(b)
	r.order = append(r.order, recentPut{key, r.seq})
	// Drop the oldest puts until within the bounds; order holds at most
	// twice recentMax puts, stale ones among them.
	for len(r.m) > recentMax || r.bytes > recentMaxBytes || len(r.order) > 2*recentMax {
		p := r.order[0]
		r.order = r.order[1:]
		if e, ok := r.m[p.key]; ok && e.seq == p.seq {
			r.bytes -= len(e.b)
			delete(r.m, p.key)
		}
	}
}

// get returns a deep copy of key's object when it was decoded from bytes
// equal to b, as a read returns it (readTypeMeta); nil otherwise.
func (r *recentObjects) get(key string, b []byte, readTypeMeta func(runtime.Object) bool) runtime.Object {
	r.mu.Lock()
	e, ok := r.m[key]
	r.mu.Unlock()
	if !ok || !bytes.Equal(e.b, b) {
		return nil
	}
	o := e.o.DeepCopyObject()
	if !readTypeMeta(o) {
		return nil
	}
	return o
}

// readTypeMeta sets on o, a copy of an object decode gave a handler, the
// kind and apiVersion decodeRead gives a read: a typed object's, which
// decode clears (unstructured and metadata-only objects keep theirs). It
// returns false when they are not known yet.
func (i *informer) readTypeMeta(o runtime.Object) bool {
	switch o.(type) {
	case *unstructured.Unstructured, *metav1.PartialObjectMetadata:
		return true
	}
	gvk := i.readGVK.Load()
	if gvk == nil {
		return false
	}
	o.GetObjectKind().SetGroupVersionKind(*gvk)
	return true
}
