package jcache

// Catch-up: the deletes made while no handler of the file was current
// reach the handlers registered later, ahead of their replay.
//
// Invariant. Every object a handler of the file was given and that has
// been deleted since reaches every handler registered on the file by a
// later process: as OnDelete(DeletedFinalStateUnknown), at least once,
// before the replay's OnAdd of anything under the same key; as long as
// the events after the record are retained (Trimmed, below).
//
// The record P ("handlers last current") is the committed offset of the
// journal consumer RetentionConsumer ("jcache"), which the file's
// retention rounds (retention.go) set to the hold: the lowest offset every
// running handler of the file had delivered (a handler that stopped
// counts where it stopped: below), or the head when none has run. So at
// P every handler of the file had been given every event up to P. A round
// commits it whenever it moved (a round follows an append within
// retentionGap, or Options.retentionInterval when quiet), and once more when the
// feed stops gracefully. The feed reads P once, when it opens the file
// (acquire), before any round of this process commits; every
// registration of this process catches up from it. The rounds commit at
// most P (the hold is capped) until a registration that joined under the
// cap has caught up (its replay, below, done) and none is still catching
// up (one catching up counts as P). So a crash at any point leaves a
// committed offset at or below what every handler was given: deletes
// already given are given again, never fewer.
//
// A handler that stops (its informer stops with the process, or
// RemoveEventHandler) caps the hold at the offset it had delivered (or
// lowers the cap to it) until a registration that joins after it has
// caught up: the handlers that stop one after another at shutdown are
// recorded at the lowest of them, not at a head they were never given.
//
// No record: a file without the consumer (first start, or written
// before records existed with trimming off): no catch-up, as for a first
// start. The consumer is created at the feed's first start, before any
// handler runs, at the offset before the first retained event, so a
// process that dies before its first commit leaves a record at or below
// anything its handlers were given.
//
// Budget. A file whose informer gets no handler (read only through Get
// and List) would keep the hold capped, and the events after it, for the
// whole process. With trimming on, the cap is lifted (logged) once no
// registration is catching up and the events retained pass recordBudget.
// With trimming off nothing is trimmed anyway: the cap stays.
//
// Catch-up. A registration reads the events after P alongside its
// replay: before the replay's chunk c (keys in (previous chunk's last
// key, c's last key], read at head h_c), it gets, for each key of that
// range with a DELETED in (P, h_c], one
// OnDelete(DeletedFinalStateUnknown{Key, Obj}) per UID deleted there (the
// last DELETED of that UID, in offset order), except a UID the key holds
// again at h_c (it left the scope and came back). Obj is the DELETED's
// last object (handler.go's dispatch: decoded as the handler's type,
// transformed). Then the chunk's OnAdds follow as always, so a name
// recreated with a new UID gets DELETE, then ADD. Per chunk, not once
// before the replay: the follow skips events at or below h_c for the
// chunk's keys, so a delete in (first head, h_c] would otherwise reach
// nobody. A name created and deleted entirely after P gets a delete too
// (its object was never given): catch-up keeps no memory per key that
// only changed. HasSynced still waits for the replay, so it means "given
// everything" with the deletes. A registration long after the start
// reads every event retained since P, once.
//
// Moved. A DELETED with reason moved is a key that left a ranged file
// (feedrange.go): the object lives on, held by another replica, so
// catch-up gives no delete for it.
//
// Trimmed. Once the cap is lifted, the events after P are retained as any
// others (Retention.MaxBytes beyond the hold): a registration long after
// the start may find part of them trimmed; so may any, past
// Retention.HardMaxBytes. The read then reports ErrTrimmed, logged at
// error level with how many offsets were lost, and the catch-up goes on
// from the first retained event.

import (
	"context"
	"errors"
	"slices"
	"sort"

	toolscache "k8s.io/client-go/tools/cache"

	"github.com/watchjournal/watchjournal/journal"
)

// recordBudget is how many bytes of events (Settings.JournalBytes) a file
// may retain while its hold is capped and no registration has caught up:
// twice the retention's MaxBytes, DefaultRetention's when it sets none.
func recordBudget(p journal.Retention) uint64 {
	return 2 * max(p.MaxBytes, DefaultRetention.MaxBytes)
}

// catchUp is one registration's catch-up (see the top of the file).
type catchUp struct {
	inf  *informer
	next uint64 // the next offset to read

	// gone holds, per key, the last DELETED of each UID deleted (without
	// its Object), in offset order; now the key's UID at the last offset
	// read ("" when absent), for the keys in gone.
	gone map[string][]journal.Event
	now  map[string]string

	// Keys up to through (every key once all) have been given their
	// deletes: later events of theirs are the follow's.
	through string
	passed  bool
	all     bool

	given int
}

func newCatchUp(inf *informer, record uint64) *catchUp {
	return &catchUp{inf: inf, next: record + 1, gone: map[string][]journal.Event{}, now: map[string]string{}}
}

// chunk gives h the deletes of the keys up to last (every key when end),
// as of head: see the top of the file.
func (c *catchUp) chunk(ctx context.Context, h toolscache.ResourceEventHandler, head uint64, last string, end bool) error {
	if c.all {
		return nil
	}
	if err := c.readTo(ctx, head); err != nil {
		return err
	}
	var keys []string
	for k := range c.gone {
		if end || k <= last {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	for _, k := range keys {
		for _, e := range c.gone[k] {
			if e.UID == c.now[k] {
				continue
			}
			o, err := c.object(e)
			if err != nil {
				return err
			}
			if ctx.Err() != nil {
				return nil
			}
			h.OnDelete(toolscache.DeletedFinalStateUnknown{Key: k, Obj: o})
			c.given++
		}
		delete(c.gone, k)
		delete(c.now, k)
	}
	c.through, c.passed, c.all = last, true, end
	return nil
}

// readTo reads the events from c.next up to offset to.
func (c *catchUp) readTo(ctx context.Context, to uint64) error {
	j := c.inf.f.j
	for c.next <= to && ctx.Err() == nil {
		evs, err := j.Read(c.next, journal.DefaultBatch)
		if te := (*journal.TrimmedError)(nil); errors.As(err, &te) {
			c.inf.log.Error(err, "deletes made while the handlers were not current were trimmed before a handler was given them",
				"resource", c.inf.f.res.String(), "offset", c.next, "lost", te.First-c.next)
			c.next = te.First
			continue
		}
		if err != nil {
			return err
		}
		if len(evs) == 0 {
			return nil
		}
		for _, e := range evs {
			if e.Offset > to {
				c.next = e.Offset
				return nil
			}
			c.next = e.Offset + 1
			if c.passed && e.Key <= c.through || movedOut(e) {
				continue // given already, or no deletion (feedrange.go)
			}
			if e.Type == journal.Deleted {
				e.Object = nil // read again when given (object)
				g := slices.DeleteFunc(c.gone[e.Key], func(d journal.Event) bool { return d.UID == e.UID })
				c.gone[e.Key] = append(g, e)
				c.now[e.Key] = ""
			} else if _, ok := c.gone[e.Key]; ok {
				c.now[e.Key] = e.UID
			}
		}
	}
	return nil
}

// object returns the last object of DELETED e, read again at its offset;
// a metadata-only one when the event was trimmed meanwhile.
func (c *catchUp) object(e journal.Event) (any, error) {
	evs, err := c.inf.f.j.Read(e.Offset, 1)
	if err != nil && !errors.Is(err, journal.ErrTrimmed) {
		return nil, err
	}
	if len(evs) == 0 || evs[0].Offset != e.Offset {
		return c.inf.object(e, nil, e.ResourceVersion)
	}
	return c.inf.lastObject(evs[0], c.inf.previous)
}
