package jcache

// Reads decoded on all cores.
//
// A List, a namespace's objects and an index value's objects are read in
// one read transaction (indexer.go) and every object is decoded, which is
// most of a read's CPU. So the objects of a read are gathered in batches
// of readBatch (their bytes as the transaction maps them, valid until it
// ends: journal.ObjectView), each batch is decoded on up to GOMAXPROCS
// goroutines, and its objects are then handed to the read's function in
// key order, one at a time, on the reader's goroutine: the function sees
// what a serial decode gives it, in the same order, and an object that
// does not decode is the read's error at its place (the objects before it
// handed over, none after). Memory: one batch of decoded objects beyond
// what the read keeps; the batch's goroutines have returned before its
// objects are handed over.

import (
	goruntime "runtime"
	"sync"

	"k8s.io/apimachinery/pkg/runtime"
)

// readBatch is how many objects a read decodes at a time; readPerWorker
// the fewest a decoding goroutine takes, below which a batch is decoded
// on fewer goroutines (the reader's own alone for a small read).
const (
	readBatch     = 256
	readPerWorker = 32
)

// readDecoder gathers a read's objects and hands them to fn decoded, in
// the order added. Not safe for concurrent use.
type readDecoder struct {
	inf  *informer
	fn   func(key string, obj runtime.Object) error
	keys []string
	bs   [][]byte
	objs []runtime.Object
	errs []error
}

// add gathers key's stored bytes b (valid until flush returns); a full
// batch is decoded and handed over.
func (d *readDecoder) add(key string, b []byte) error {
	d.keys = append(d.keys, key)
	d.bs = append(d.bs, b)
	if len(d.keys) >= readBatch {
		return d.flush()
	}
	return nil
}

// flush decodes the objects gathered and hands them over in order; it
// returns the first decode error, or fn's, at its place.
func (d *readDecoder) flush() error {
	n := len(d.keys)
	if n == 0 {
		return nil
	}
	d.objs, d.errs = append(d.objs[:0], make([]runtime.Object, n)...), append(d.errs[:0], make([]error, n)...)
	workers := min(goruntime.GOMAXPROCS(0), (n+readPerWorker-1)/readPerWorker)
	decode := func(w int) {
		for i := w; i < n; i += workers {
			d.objs[i], d.errs[i] = d.inf.decodeRead(d.bs[i])
		}
	}
	var wg sync.WaitGroup
	for w := 1; w < workers; w++ {
		wg.Go(func() { decode(w) })
	}
	decode(0)
	wg.Wait()
	var err error
	for i := 0; i < n && err == nil; i++ {
		if err = d.errs[i]; err == nil {
			err = d.fn(d.keys[i], d.objs[i])
		}
	}
	clear(d.objs)
	clear(d.bs)
	d.keys, d.bs = d.keys[:0], d.bs[:0]
	return err
}
