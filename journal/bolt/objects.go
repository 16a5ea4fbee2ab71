package bolt

import (
	"bytes"
	"fmt"
)

// The objects bucket maps an index key to a copy of its latest object,
// kept when retention trimming removes the journal record the index entry
// points at (journal/objects.go has the design). It is opt-in:
// its presence in the file is the switch, so a file keeps objects once
// CreateObjects has run, across restarts, and an older file opens
// unchanged.
var bucketObjects = []byte("objects")

// HasObjects reports whether the file keeps objects.
func (t *tx) HasObjects() bool {
	defer fileOp()
	return t.b(bucketObjects) != nil
}

// CreateObjects makes the file keep objects from this transaction on.
func (t *tx) CreateObjects() error {
	defer fileOp()
	if _, err := t.tx.CreateBucketIfNotExists(bucketObjects); err != nil {
		return fmt.Errorf("bolt: create %s: %w", bucketObjects, err)
	}
	return nil
}

// ObjectGet returns key's object, nil when there is none. The slice is
// bbolt's memory-mapped page: valid until the transaction ends.
func (t *tx) ObjectGet(key []byte) []byte {
	defer fileOp()
	b := t.b(bucketObjects)
	if b == nil {
		return nil
	}
	return b.Get(key)
}

// ObjectPut stores key's object; without the bucket it does nothing.
func (t *tx) ObjectPut(key, obj []byte) error {
	defer fileOp()
	b := t.b(bucketObjects)
	if b == nil {
		return nil
	}
	return b.Put(key, obj)
}

// ObjectDelete removes key's object; an absent key or bucket is no error.
func (t *tx) ObjectDelete(key []byte) error {
	defer fileOp()
	b := t.b(bucketObjects)
	if b == nil {
		return nil
	}
	return b.Delete(key)
}

// ObjectScan calls fn for each index key that starts with prefix, in key
// order, with its index value and its entry in the objects bucket (nil
// when the key has none), until fn returns false or an error. It walks
// the index and the objects bucket side by side (both are in key order):
// no lookup per key. The slices are valid only during the call.
func (t *tx) ObjectScan(prefix []byte, fn func(k, index, obj []byte) (bool, error)) error {
	ic, _ := t.cursor(bucketIndex)
	oc, objects := t.cursor(bucketObjects)
	var ok, ov []byte
	if objects {
		ok, ov = oc.seek(prefix)
	}
	for k, iv := ic.seek(prefix); k != nil && bytes.HasPrefix(k, prefix); k, iv = ic.next() {
		for objects && ok != nil && bytes.Compare(ok, k) < 0 {
			ok, ov = oc.next()
		}
		var v []byte
		if ok != nil && bytes.Equal(ok, k) {
			v = ov
		}
		more, err := fn(k, iv, v)
		if err != nil || !more {
			return err
		}
	}
	return nil
}

// ObjectKeys calls fn with every key of the objects bucket, in key order,
// until fn returns an error. The file check uses it.
func (t *tx) ObjectKeys(fn func(k []byte) error) error {
	c, objects := t.cursor(bucketObjects)
	if !objects {
		return nil
	}
	for k, _ := c.first(); k != nil; k, _ = c.next() {
		if err := fn(k); err != nil {
			return err
		}
	}
	return nil
}
