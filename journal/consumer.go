package journal

// Consumers.
//
// A Consumer reads from its own durable position: its committed offset is
// stored in the same file, so after a crash it resumes right after its last
// Commit (at-least-once). Registered consumers hold retention back.
//
// When retention has passed a consumer (a read returns a *TrimmedError,
// matching ErrTrimmed) the events in between are gone, and the consumer
// rebuilds its state instead of replaying:
//
//  1. head, err := j.Snapshot(fn): fn receives every index entry (key, UID,
//     resourceVersion), all read in one transaction that also gives head,
//     the offset the snapshot is exactly current with;
//  2. the consumer replaces its own state with the snapshot: keys it holds
//     that the snapshot lacks were deleted; keys whose UID or
//     resourceVersion differ changed (read their objects with
//     ViewObjects, objects.go);
//  3. c.Seek(head + 1), then Next and Commit as usual.

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"time"

	"github.com/watchjournal/watchjournal/internal/storage"
)

// Consumer reads the journal from its own position and commits, durably in
// the journal's file, the offset up to which it has processed events.
// Delivery is at-least-once: after a crash a consumer resumes right after
// its last commit, so events read but not committed are read again.
//
// A Consumer is not safe for concurrent use; give each goroutine its own.
// Consumers read with short read transactions of at most max events, so a
// slow consumer never holds the writer back.
type Consumer struct {
	j    *Journal
	name string
	next uint64 // next offset to read
}

// Consumers is a journal's registry of durable consumers: open one to
// read (Open), create one at an offset, move or read a committed offset,
// delete one, list them. Get it from Journal.Consumers; each method is one
// transaction, and Consumers is safe for concurrent use. Registered
// consumers hold retention back (package compactor) until the hard byte
// cap. A consumer name is a key: non-empty, at most MaxKeyBytes.
type Consumers struct{ j *Journal }

// Consumers returns j's registry of durable consumers.
func (j *Journal) Consumers() Consumers { return Consumers{j: j} }

// ErrNoConsumer is returned for a consumer that does not exist in a journal
// opened read-only (only a writable journal registers consumers).
var ErrNoConsumer = errors.New("journal: no such consumer")

// Open returns the named consumer, positioned right after its committed
// offset. A new name is registered as if it had committed everything before
// the first retained event, so it reads from there. Registered consumers
// hold retention back (package compactor) until the hard byte cap. An
// empty name or one longer than MaxKeyBytes is refused with ErrBadKey.
func (cs Consumers) Open(name string) (*Consumer, error) {
	j := cs.j
	if err := checkKey("consumer name", name); err != nil {
		return nil, err
	}
	var committed uint64
	var found bool
	if err := j.store.View(func(tx storage.Tx) error { committed, found = tx.Consumer(name); return nil }); err != nil {
		return nil, err
	}
	if !found {
		if j.store.ReadOnly() {
			return nil, fmt.Errorf("%w: %q", ErrNoConsumer, name)
		}
		if err := j.store.Update(func(tx storage.Tx) error {
			var ok bool
			if committed, ok = tx.Consumer(name); ok {
				return nil
			}
			committed = firstRetained(tx) - 1
			return tx.SetConsumer(name, committed)
		}); err != nil {
			return nil, fmt.Errorf("journal: register consumer %q: %w", name, err)
		}
	}
	return &Consumer{j: j, name: name, next: committed + 1}, nil
}

// ErrConsumerExists is returned by Consumers.Create for a name already
// registered.
var ErrConsumerExists = errors.New("journal: consumer exists")

// Create registers the new consumer name to read next from offset
// next (its committed offset next-1); next 0 means the first retained
// event, as for Consumers.Open. The check that no consumer of that name
// exists and the registration are one write transaction: a name registered
// meanwhile is refused with ErrConsumerExists, never moved. It returns
// ErrOffsetRange for next past the head + 1, a *TrimmedError
// (ErrTrimmed) for next below the first retained event, and ErrBadKey
// for a name Consumers.Open refuses; ErrReadOnly on a read-only journal.
func (cs Consumers) Create(name string, next uint64) error {
	j := cs.j
	if err := checkKey("consumer name", name); err != nil {
		return err
	}
	return j.store.Update(func(tx storage.Tx) error {
		if _, ok := tx.Consumer(name); ok {
			return fmt.Errorf("%w: %q", ErrConsumerExists, name)
		}
		first, head := firstRetained(tx), tx.NextOffset()-1
		switch {
		case next == 0:
			next = first
		case next > head+1:
			return fmt.Errorf("%w: %d > %d + 1", ErrOffsetRange, next, head)
		case next < first:
			return &TrimmedError{Requested: next, First: first}
		}
		return tx.SetConsumer(name, next-1)
	})
}

// Journal returns the journal the consumer reads.
func (c *Consumer) Journal() *Journal { return c.j }

// Name returns the consumer's name.
func (c *Consumer) Name() string { return c.name }

// Position returns the offset the next read starts at.
func (c *Consumer) Position() uint64 { return c.next }

// Seek moves the read position to offset off (replay from any retained
// offset; 0 means the first retained). It does not commit.
func (c *Consumer) Seek(off uint64) { c.next = off }

// SeekTime moves the read position to the first retained event journaled
// at or after t (to the head when there is none). It does not commit.
func (c *Consumer) SeekTime(t time.Time) error {
	off, err := c.j.OffsetAt(t)
	if err != nil {
		return err
	}
	c.next = off
	return nil
}

// Committed returns the consumer's committed offset; 0 means none.
func (c *Consumer) Committed() (uint64, error) {
	var off uint64
	err := c.j.store.View(func(tx storage.Tx) error { off, _ = tx.Consumer(c.name); return nil })
	return off, err
}

// Commit durably records that every event up to and including offset off
// is processed. It is one write transaction (with fsync). Commits only move
// forward: committing the committed offset again is a no-op, one below it
// is ErrCommitBackwards (rewind on purpose with Reset). It returns
// ErrOffsetRange for an offset past the head, and ErrNoConsumer if the
// consumer was deleted meanwhile. It does not move the read position.
func (c *Consumer) Commit(off uint64) error { return c.j.Consumers().Commit(c.name, off) }

// Reset sets the committed offset to off, backwards or forwards, on
// purpose (to replay from off + 1, say), and moves the read position to
// off + 1. It is one write transaction; ErrOffsetRange past the head,
// ErrNoConsumer if the consumer was deleted meanwhile.
func (c *Consumer) Reset(off uint64) error {
	if err := c.j.Consumers().Reset(c.name, off); err != nil {
		return err
	}
	c.next = off + 1
	return nil
}

// ErrOffsetRange is returned by a commit past the journal's head.
var ErrOffsetRange = errors.New("journal: offset past the head")

// Commit commits offset off for the existing consumer name, in one
// write transaction; ErrNoConsumer if there is no such consumer (it does not
// register one), ErrOffsetRange if off is past the head, ErrCommitBackwards
// if off is below its committed offset (see Consumers.Reset).
func (cs Consumers) Commit(name string, off uint64) error {
	j := cs.j
	return j.setConsumer(name, off, false)
}

// Reset sets the committed offset of the existing consumer name to
// off, backwards or forwards; errors as Consumers.Commit, but never
// ErrCommitBackwards.
func (cs Consumers) Reset(name string, off uint64) error {
	j := cs.j
	return j.setConsumer(name, off, true)
}

func (j *Journal) setConsumer(name string, off uint64, rewind bool) error {
	return j.store.Update(func(tx storage.Tx) error {
		have, ok := tx.Consumer(name)
		if !ok {
			return fmt.Errorf("%w: %q", ErrNoConsumer, name)
		}
		if head := tx.NextOffset() - 1; off > head {
			return fmt.Errorf("%w: %d > %d", ErrOffsetRange, off, head)
		}
		if off == have {
			return nil
		}
		if off < have && !rewind {
			return fmt.Errorf("%w: %q: %d < %d", ErrCommitBackwards, name, off, have)
		}
		return tx.SetConsumer(name, off)
	})
}

// Committed returns the committed offset of the named consumer,
// and ErrNoConsumer when there is none.
func (cs Consumers) Committed(name string) (uint64, error) {
	j := cs.j
	var off uint64
	var ok bool
	if err := j.store.View(func(tx storage.Tx) error { off, ok = tx.Consumer(name); return nil }); err != nil {
		return 0, err
	}
	if !ok {
		return 0, fmt.Errorf("%w: %q", ErrNoConsumer, name)
	}
	return off, nil
}

// TryNext returns up to max events (and about 4 MiB of records at most, as
// Journal.Read) from the read position and moves past
// them; none at the head. max 0 means DefaultBatch, a negative max is
// ErrBadMax, as for Journal.Read. It returns a *TrimmedError (ErrTrimmed) when
// retention has dropped the position's event: resynchronize with
// Journal.Snapshot, then Seek to its head + 1.
func (c *Consumer) TryNext(max int) ([]Event, error) {
	evs, err := c.j.Read(c.next, max)
	if err != nil {
		return nil, err
	}
	if len(evs) > 0 {
		c.next = evs[len(evs)-1].Offset + 1
	}
	return evs, nil
}

// Next is TryNext that blocks at the head until the writer appends, ctx is
// done (ctx.Err()) or the journal closes (ErrClosed). It returns at least one event when
// err is nil. Woken by the writer; it does not poll.
func (c *Consumer) Next(ctx context.Context, max int) ([]Event, error) {
	for {
		evs, err := c.TryNext(max)
		if err != nil || len(evs) > 0 {
			return evs, err
		}
		if c.next == 0 {
			c.next = 1
		}
		if err := c.j.Wait(ctx, c.next-1); err != nil {
			return nil, err
		}
	}
}

// Delete removes a consumer and its hold on retention.
func (cs Consumers) Delete(name string) error {
	j := cs.j
	return j.store.Update(func(tx storage.Tx) error { return tx.DeleteConsumer(name) })
}

// ConsumerInfo describes one consumer.
type ConsumerInfo struct {
	// Name is the consumer's name.
	Name string
	// Committed is its committed offset; 0 means none.
	Committed uint64
	// Lag is how many events lie after Committed up to the head.
	Lag uint64
}

// List returns the registered consumers in name order.
func (cs Consumers) List() ([]ConsumerInfo, error) {
	j := cs.j
	var out []ConsumerInfo
	err := j.store.View(func(tx storage.Tx) error {
		head := tx.NextOffset() - 1
		return tx.Consumers(func(name string, off uint64) error {
			out = append(out, ConsumerInfo{Name: name, Committed: off, Lag: head - min(head, off)})
			return nil
		})
	})
	sort.Slice(out, func(a, b int) bool { return out[a].Name < out[b].Name })
	return out, err
}

// Snapshot calls fn for every index entry in key order and returns the
// journal's head offset, all read in one read transaction: the index is
// exactly the state after the event at head. A consumer that fell behind
// retention (ErrTrimmed) rebuilds its state from the entries, then Seeks
// to head + 1 and follows. fn must not call the Journal. A panic in fn
// ends the read transaction and then propagates from Snapshot with fn's
// value (it is not ErrCorrupt).
func (j *Journal) Snapshot(fn func(IndexEntry) error) (head uint64, err error) {
	err = j.store.View(func(tx storage.Tx) error {
		head = tx.NextOffset() - 1
		return tx.IndexScan(nil, func(k, v []byte) (bool, error) {
			e, err := decodeIndex(k, v)
			if err != nil {
				return false, err
			}
			return true, fn(e)
		})
	})
	return head, err
}

// OffsetAt returns the first retained offset whose event was journaled at
// or after t, or head + 1 when there is none. Event times never decrease
// with offsets, also across a wall clock stepped back (each event is
// stamped no earlier than the one before it: clock.go, which says what a
// step back does to the times), so it is a binary search.
func (j *Journal) OffsetAt(t time.Time) (uint64, error) {
	var off uint64
	err := j.store.View(func(tx storage.Tx) error {
		lo, hi := firstRetained(tx), tx.NextOffset() // answer in [lo, hi]
		for lo < hi {
			mid := lo + (hi-lo)/2
			rec := tx.Record(mid)
			if rec == nil { // a gap cannot happen; be safe
				lo = mid + 1
				continue
			}
			e, err := decodeEvent(mid, rec)
			if err != nil {
				return err
			}
			if e.Time.Before(t) {
				lo = mid + 1
			} else {
				hi = mid
			}
		}
		off = lo
		return nil
	})
	return off, err
}

// Trim deletes events oldest first, in one write transaction: those with
// offsets below before, at most max of them, no more once those deleted
// reach maxBytes (0: no bound; at least one is deleted), and only while
// the retained size is above minBytes (0: no size condition). It returns
// how many it deleted and their size in bytes. Retention (package
// compactor) calls it in bounded steps: bounded in bytes too, as the
// objects a trim keeps (below) are copied into the transaction, which
// bbolt holds on the heap until the commit. The file does not shrink: the store reuses the pages (see
// compactor.CompactFile). When the file keeps objects, a deleted event
// that is still a live key's latest object is copied into the objects
// bucket first, in the same transaction (objects.go).
func (w *Writer) Trim(before uint64, max int, maxBytes int64, minBytes uint64) (n int, size int64, err error) {
	return w.trim(before, max, maxBytes, minBytes, false)
}

// TrimRetained is Trim that also keeps every event a consumer has not
// committed, read in the same write transaction: a consumer created,
// reset or moved back after the caller chose before (retention reads the
// consumers first, outside the transaction) keeps its place.
func (w *Writer) TrimRetained(before uint64, max int, maxBytes int64, minBytes uint64) (n int, size int64, err error) {
	return w.trim(before, max, maxBytes, minBytes, true)
}

func (w *Writer) trim(before uint64, max int, maxBytes int64, minBytes uint64, consumers bool) (n int, size int64, err error) {
	err = w.j.store.Update(func(tx storage.Tx) error {
		if consumers {
			if err := tx.Consumers(func(_ string, off uint64) error {
				before = min(before, off+1)
				return nil
			}); err != nil {
				return err
			}
		}
		var keep func(uint64, []byte) error
		if tx.HasObjects() {
			keep = func(off uint64, rec []byte) error { return keepTrimmed(tx, off, rec, w.j.seal) }
		}
		var err error
		n, size, err = tx.DeleteRecords(before, max, maxBytes, minBytes, keep)
		return err
	})
	return n, size, err
}

// JournalBytes returns the total size of the retained events as stored, in
// bytes (payload, not file size).
func (s Settings) JournalBytes() (uint64, error) {
	j := s.j
	var n uint64
	err := j.store.View(func(tx storage.Tx) error { n = tx.JournalBytes(); return nil })
	return n, err
}
