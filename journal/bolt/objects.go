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

func (t *tx) HasObjects() bool {
	defer fileOp()
	return t.b(bucketObjects) != nil
}

func (t *tx) CreateObjects() error {
	defer fileOp()
	if _, err := t.tx.CreateBucketIfNotExists(bucketObjects); err != nil {
		return fmt.Errorf("bolt: create %s: %w", bucketObjects, err)
	}
	return nil
}

func (t *tx) ObjectGet(key []byte) []byte {
	defer fileOp()
	if b := t.b(bucketObjects); b != nil {
		return b.Get(key)
	}
	return nil
}

func (t *tx) ObjectPut(key, obj []byte) error {
	defer fileOp()
	if b := t.b(bucketObjects); b != nil {
		return b.Put(key, obj)
	}
	return nil
}

func (t *tx) ObjectDelete(key []byte) error {
	defer fileOp()
	if b := t.b(bucketObjects); b != nil {
		return b.Delete(key)
	}
	return nil
}

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
