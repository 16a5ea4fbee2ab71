package bolt

// Derived buckets: package journal's secondary indexes (journal/indexes.go),
// one bucket per index, named "idx/<name>". The store knows nothing of
// their entries; it only gives a transaction the bucket operations, creating
// a bucket on its first write and dropping it whole. Only names with the
// "idx/" prefix are accepted, so that no caller reaches the core buckets
// (meta, index, journal, seen, consumers, objects) through them.

import (
	"bytes"
	"fmt"
	"strings"
)

// derivedPrefix is the prefix every derived bucket's name carries.
const derivedPrefix = "idx/"

func checkDerived(name string) error {
	if !strings.HasPrefix(name, derivedPrefix) || len(name) == len(derivedPrefix) {
		return fmt.Errorf("bolt: %q is not a derived bucket (its name must start with %q)", name, derivedPrefix)
	}
	return nil
}

func (t *tx) DerivedGet(bucket string, k []byte) []byte {
	if checkDerived(bucket) != nil {
		return nil
	}
	defer fileOp()
	b := t.tx.Bucket([]byte(bucket))
	if b == nil {
		return nil
	}
	return b.Get(k)
}

func (t *tx) DerivedPut(bucket string, k, v []byte) error {
	if err := checkDerived(bucket); err != nil {
		return err
	}
	defer fileOp()
	b, err := t.tx.CreateBucketIfNotExists([]byte(bucket))
	if err != nil {
		return fmt.Errorf("bolt: create %s: %w", bucket, err)
	}
	return b.Put(k, v)
}

func (t *tx) DerivedDelete(bucket string, k []byte) error {
	if err := checkDerived(bucket); err != nil {
		return err
	}
	defer fileOp()
	b := t.tx.Bucket([]byte(bucket))
	if b == nil {
		return nil
	}
	return b.Delete(k)
}

func (t *tx) DerivedScan(bucket string, prefix []byte, fn func(k, v []byte) (bool, error)) error {
	if err := checkDerived(bucket); err != nil {
		return err
	}
	c, ok := t.cursor([]byte(bucket))
	if !ok {
		return nil
	}
	for k, v := c.seek(prefix); k != nil && bytes.HasPrefix(k, prefix); k, v = c.next() {
		more, err := fn(k, v)
		if err != nil || !more {
			return err
		}
	}
	return nil
}

func (t *tx) DropDerived(bucket string) error {
	if err := checkDerived(bucket); err != nil {
		return err
	}
	defer fileOp()
	if t.tx.Bucket([]byte(bucket)) == nil {
		return nil
	}
	return t.tx.DeleteBucket([]byte(bucket))
}
