package jcache

// Retention: each file's events are trimmed (package compactor) under
// Options.Retention, DefaultRetention unless set (a zero journal.Retention
// turns trimming off), and never past what a handler of the file has not
// yet been given.
//
// Hold. The feed's handlers (registrations of every informer on the file)
// are its holders while they run. The hold is the lowest offset a holder
// has delivered (a holder still replaying counts as 0: it holds
// everything), or the head when none runs. Before each trim the hold is
// committed as the journal consumer "jcache" (ResetConsumer: a handler
// that joins lowers it), so the compactor keeps every event a handler has
// not yet delivered, as it does for any consumer. A handler that joins
// while a trim runs replays from a head at or above the committed hold,
// so nothing it follows is trimmed.
//
// Old objects. An undelivered MODIFIED's previous record may be trimmed
// (it is below the hold); journal trimming then keeps that record's object
// as its key's copy (journal/objects.go, "Previous objects"), and the
// handler reads it through ObjectView.Previous, checked against the
// event's PrevResourceVersion or UID and order. Since nothing at or above
// the hold is trimmed, no later record of the key overwrites that copy
// before the handler has delivered the event.
//
// Bound. The journal's events: Retention.MaxBytes of payload (default 64
// MiB), plus what one round's time of appends adds (retentionGap, 1 s, or
// the round's own time when longer; HardMaxBytes is exceeded by as much),
// plus whatever a handler that falls behind holds; the file beside
// them holds each live key's latest object (the record, or a copy once it
// is trimmed: about the live objects' JSON, ~1.3–2× with bbolt's pages).
// There is no hard cap by default (Retention.HardMaxBytes), because it
// would trim events a handler has not been given: that handler then stops
// with ErrTrimmed, logged. bbolt reuses the pages trimming frees; the file
// does not shrink (journalctl compact rewrites it, offline).

import (
	"context"
	"errors"
	"time"

	"github.com/watchjournal/watchjournal/journal"
	"github.com/watchjournal/watchjournal/journal/compactor"
)

// DefaultRetention is the retention of every cache file when
// Options.Retention is nil: at most 64 MiB of encoded events beyond what
// the handlers have been given (no count, age or hard limit).
var DefaultRetention = journal.Retention{MaxBytes: 64 << 20}

// RetentionConsumer is the name of the journal consumer through which a
// cache file's handlers hold retention (journalctl consumers shows it).
const RetentionConsumer = "jcache"

// retentionInterval is the longest time between two trims of a file
// without appends (a variable for tests).
var retentionInterval = 10 * time.Second

// retentionGap is the shortest time between two rounds of retention (a
// round is up to two write transactions, each fsynced twice, and takes
// bbolt's one writer lock). Without it a round followed every append:
// during a first list, every chunk the list committed, so the list's
// commits waited on the rounds' and the fsyncs doubled (profiled at 50,000
// ConfigMaps, a first start: the rounds held the writer 0.38 s of the
// list's time and spent 0.57 s in their own syscalls). Its cost: Bound,
// at the top of the file.
var retentionGap = time.Second

// policy returns the retention o asks for and whether any limit is set.
func (o *Options) policy() (journal.Retention, bool) {
	p := DefaultRetention
	if o.Retention != nil {
		p = *o.Retention
	}
	return p, p != (journal.Retention{})
}

// holdFrom adds r to the feed's holders; the returned func removes it.
func (f *feed) holdFrom(r *registration) func() {
	f.hmu.Lock()
	defer f.hmu.Unlock()
	if f.holders == nil {
		f.holders = map[*registration]struct{}{}
	}
	f.holders[r] = struct{}{}
	return func() {
		f.hmu.Lock()
		delete(f.holders, r)
		f.hmu.Unlock()
	}
}

// hold returns the highest offset retention may trim through: the lowest
// delivered offset of the holders, head when none runs.
func (f *feed) hold(head uint64) uint64 {
	f.hmu.Lock()
	defer f.hmu.Unlock()
	h := head
	for r := range f.holders {
		if !r.replayed.Load() {
			return 0
		}
		h = min(h, r.pos.Load())
	}
	return h
}

// retain trims f's journal under p until ctx is done (see the top of the
// file). It records p in the file (Journal.SetRetention) for tools.
func (f *feed) retain(ctx context.Context, p journal.Retention, o *Options) error {
	if err := f.j.SetRetention(p); err != nil {
		return err
	}
	if err := f.j.CreateConsumer(RetentionConsumer, 0); err != nil && !errors.Is(err, journal.ErrConsumerExists) {
		return err
	}
	c := compactor.New(f.j, p, compactor.Options{Logger: o.Logger.WithValues("resource", f.res.String())})
	last, have := uint64(0), false // the hold last committed
	for {
		round := time.Now()
		head, err := f.j.Head()
		if err != nil {
			return err
		}
		// A write transaction only when the hold moved.
		if h := f.hold(head); !have || h != last {
			if err := f.j.ResetConsumer(RetentionConsumer, h); err != nil {
				return err
			}
			last, have = h, true
		}
		if _, err := c.Trim(); err != nil {
			return err
		}
		wctx, cancel := context.WithTimeout(ctx, f.retentionInterval)
		_ = f.j.Wait(wctx, head)
		cancel()
		if gap := min(retentionGap, f.retentionInterval) - time.Since(round); gap > 0 {
			t := time.NewTimer(gap)
			select {
			case <-ctx.Done():
				t.Stop()
			case <-t.C:
			}
		}
		if ctx.Err() != nil {
			return nil
		}
	}
}
