package bolt

import (
	"bytes"
	"errors"
	"fmt"

	bbolt "go.etcd.io/bbolt"

	"github.com/watchjournal/watchjournal/internal/storage"
)

var _ storage.Tx = (*tx)(nil)

// tx is the store's storage.Tx, over one bbolt transaction: its exported
// methods are the interface's, documented there. Every call into bbolt
// runs under fileOp (fault.go): the methods without a callback defer it
// whole, the scans call their callback between cursor moves that each
// run under it.
type tx struct {
	tx *bbolt.Tx
	// buckets holds the handles of the buckets that are never deleted
	// (meta, index, journal, objects once it exists), looked up once per
	// transaction: a read transaction's lookup otherwise walks the root
	// bucket every time.
	buckets [4]*bbolt.Bucket
	// gets and cursors serve the point lookups of a read transaction
	// (get): the first lookup in a bucket is bbolt's Bucket.Get, the later
	// ones seek one cursor kept for the bucket, whose stack bbolt reuses
	// (Bucket.Get makes a new cursor, and grows its stack by append, on
	// every call: a few allocations per lookup of a List's records).
	gets    [4]uint8
	cursors [4]*bbolt.Cursor
}

// bucketSlot returns the index of name in buckets, -1 for another bucket.
func bucketSlot(name []byte) int {
	switch string(name) {
	case string(bucketMeta):
		return 0
	case string(bucketIndex):
		return 1
	case string(bucketJournal):
		return 2
	case string(bucketObjects):
		return 3
	}
	return -1
}

func (t *tx) b(name []byte) *bbolt.Bucket {
	i := bucketSlot(name)
	if i < 0 {
		return t.tx.Bucket(name)
	}
	if t.buckets[i] == nil {
		t.buckets[i] = t.tx.Bucket(name)
	}
	return t.buckets[i]
}

// get returns key's value in the bucket name (which must exist), as
// Bucket.Get does: nil for an absent key or a nested bucket. In a read
// transaction, lookups after the first in a bucket seek the bucket's kept
// cursor (see gets). A write transaction always uses Bucket.Get: its
// writes may change the pages under a kept cursor.
func (t *tx) get(name, key []byte) []byte {
	i := bucketSlot(name)
	b := t.b(name)
	if i < 0 || t.tx.Writable() || t.gets[i] == 0 {
		if i >= 0 {
			t.gets[i] = 1
		}
		return b.Get(key)
	}
	c := t.cursors[i]
	if c == nil {
		c = b.Cursor()
		t.cursors[i] = c
	}
	k, v := c.Seek(key)
	if !bytes.Equal(k, key) {
		return nil
	}
	return v
}

func (t *tx) Meta(name string) []byte {
	defer fileOp()
	return t.b(bucketMeta).Get([]byte(name))
}

func (t *tx) SetMeta(name string, v []byte) error {
	defer fileOp()
	if v == nil {
		return t.b(bucketMeta).Delete([]byte(name))
	}
	return t.b(bucketMeta).Put([]byte(name), v)
}

func (t *tx) IndexGet(key []byte) []byte {
	defer fileOp()
	return t.get(bucketIndex, key)
}

func (t *tx) IndexPut(key, val []byte) error {
	defer fileOp()
	b := t.b(bucketIndex)
	if b.Get(key) == nil {
		if err := t.addCount(1); err != nil {
			return err
		}
	}
	return b.Put(key, val)
}

func (t *tx) IndexDelete(key []byte) error {
	defer fileOp()
	b := t.b(bucketIndex)
	if b.Get(key) == nil {
		return nil
	}
	if err := t.addCount(-1); err != nil {
		return err
	}
	return b.Delete(key)
}

func (t *tx) IndexCount() uint64 {
	defer fileOp()
	return getU64(t.b(bucketMeta).Get(metaCount))
}

func (t *tx) addCount(d int64) error {
	n := int64(t.IndexCount()) + d
	if n < 0 {
		n = 0
	}
	return t.b(bucketMeta).Put(metaCount, u64(uint64(n)))
}

func (t *tx) IndexScan(after []byte, fn func(k, v []byte) (bool, error)) error {
	c, _ := t.cursor(bucketIndex)
	var k, v []byte
	if after == nil {
		k, v = c.first()
	} else {
		k, v = c.seek(after)
		if k != nil && bytes.Equal(k, after) {
			k, v = c.next()
		}
	}
	for ; k != nil; k, v = c.next() {
		more, err := fn(k, v)
		if err != nil || !more {
			return err
		}
	}
	return nil
}

func (t *tx) Append(rec []byte) (uint64, error) {
	defer fileOp()
	meta := t.b(bucketMeta)
	off := getU64(meta.Get(metaNext))
	if off == 0 {
		off = 1
	}
	j := t.b(bucketJournal)
	j.FillPercent = 1.0 // append-only keys: fill pages completely
	err := errors.Join(j.Put(u64(off), rec), meta.Put(metaNext, u64(off+1)),
		meta.Put(metaBytes, u64(getU64(meta.Get(metaBytes))+uint64(len(rec)))))
	if err != nil {
		return 0, err
	}
	return off, nil
}

func (t *tx) JournalBytes() uint64 {
	defer fileOp()
	return getU64(t.b(bucketMeta).Get(metaBytes))
}

func (t *tx) NextOffset() uint64 {
	defer fileOp()
	off := getU64(t.b(bucketMeta).Get(metaNext))
	if off == 0 {
		return 1
	}
	return off
}

func (t *tx) FirstOffset() uint64 {
	defer fileOp()
	k, _ := t.b(bucketJournal).Cursor().First()
	return getU64(k)
}

func (t *tx) LastOffset() uint64 {
	defer fileOp()
	k, _ := t.b(bucketJournal).Cursor().Last()
	return getU64(k)
}

func (t *tx) Record(off uint64) []byte {
	defer fileOp()
	return t.get(bucketJournal, u64(off))
}

func (t *tx) Records(from uint64, fn func(off uint64, rec []byte) (bool, error)) error {
	c, _ := t.cursor(bucketJournal)
	for k, v := c.seek(u64(from)); k != nil; k, v = c.next() {
		more, err := fn(getU64(k), v)
		if err != nil || !more {
			return err
		}
	}
	return nil
}

func (t *tx) DeleteRecords(before uint64, max int, maxBytes int64, minBytes uint64, each func(off uint64, rec []byte) error) (n int, size int64, err error) {
	left := t.JournalBytes()
	c, _ := t.cursor(bucketJournal)
	for k, v := c.first(); k != nil && getU64(k) < before && n < max && (maxBytes <= 0 || size < maxBytes) && left > minBytes; k, v = c.first() {
		if each != nil {
			if err := each(getU64(k), v); err != nil {
				return n, size, err
			}
		}
		size += int64(len(v))
		left -= min(left, uint64(len(v)))
		if err := c.delete(); err != nil {
			return n, size, err
		}
		n++
	}
	return n, size, t.setJournalBytes(left)
}

// setJournalBytes records the total size of the retained records.
func (t *tx) setJournalBytes(n uint64) error {
	defer fileOp()
	return t.b(bucketMeta).Put(metaBytes, u64(n))
}

func (t *tx) SeenClear() error {
	defer fileOp()
	if k, _ := t.b(bucketSeen).Cursor().First(); k == nil {
		return nil
	}
	if err := t.tx.DeleteBucket(bucketSeen); err != nil {
		return fmt.Errorf("bolt: clear %s: %w", bucketSeen, err)
	}
	_, err := t.tx.CreateBucket(bucketSeen)
	return err
}

func (t *tx) SeenPut(key []byte) error {
	defer fileOp()
	return t.b(bucketSeen).Put(key, []byte{})
}

func (t *tx) SeenHas(key []byte) bool {
	defer fileOp()
	return t.b(bucketSeen).Get(key) != nil
}

func (t *tx) Consumer(name string) (uint64, bool) {
	defer fileOp()
	v := t.b(bucketConsumers).Get([]byte(name))
	return getU64(v), v != nil
}

func (t *tx) SetConsumer(name string, off uint64) error {
	defer fileOp()
	return t.b(bucketConsumers).Put([]byte(name), u64(off))
}

func (t *tx) DeleteConsumer(name string) error {
	defer fileOp()
	return t.b(bucketConsumers).Delete([]byte(name))
}

func (t *tx) Consumers(fn func(name string, off uint64) error) error {
	c, _ := t.cursor(bucketConsumers)
	for k, v := c.first(); k != nil; k, v = c.next() {
		if err := fn(string(k), getU64(v)); err != nil {
			return err
		}
	}
	return nil
}
