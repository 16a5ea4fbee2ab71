package jcache

// Retention: each file's events are trimmed (package compactor) under
// Options.Retention, DefaultRetention unless set (a zero journal.Retention
// turns trimming off), and never past what a handler of the file has not
// yet been given.
//
// Hold. The feed's handlers (registrations of every informer on the file)
// are its holders while they run. A holder's floor is the offset it has
// delivered; while it replays, the file's record P when it catches up
// from it (catchup.go), else the hold last committed (its replay reads
// at a head at or above it). The hold is the lowest floor of the holders,
// or the head when there are none; capped (catchup.go) at P until a
// registration has caught up from it. A holder that leaves caps the hold
// at its floor until a registration that joins after it has caught up,
// so handlers that stop with the process are recorded where they
// stopped, not at a head they were never given. Each round commits the
// hold as the journal consumer "jcache" (Consumers.Reset: a handler that
// joins lowers it), so the compactor keeps every event a handler has not
// yet delivered, as it does for any consumer, and the committed offset is
// the record a later process catches up from. Rounds run whatever the
// policy: with trimming off (a zero journal.Retention) they only commit.
// When the feed stops, the hold is committed once more, so a graceful
// stop records how far the handlers got.
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
// plus whatever a handler that falls behind holds, plus, while the hold
// is capped, up to the record's budget (catchup.go, recordBudget); the
// file beside them holds each live key's latest object (the record, or a
// copy once it is trimmed: about the live objects' JSON, plus bbolt's
// page overhead).
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

// retentionGap is the shortest time between two rounds of retention (a
// round is up to two write transactions, each fsynced twice, and takes
// the file's one writer lock): without it a round would follow every
// append, and during a first list every chunk the list commits would wait
// on a round's fsyncs. Its cost: Bound, at the top of the file. The
// longest time between two rounds of a quiet file is the cache's
// Options.retentionInterval.
const retentionGap = time.Second

// policy returns the retention o asks for and whether any limit is set.
func (o *Options) policy() (journal.Retention, bool) {
	p := DefaultRetention
	if o.Retention != nil {
		p = *o.Retention
	}
	return p, p != (journal.Retention{})
}

// holdFrom adds r to the feed's holders, to catch up from the file's
// record when it has one (catchup.go); the returned func removes it and
// caps the hold at its floor.
func (f *feed) holdFrom(r *registration) func() {
	f.hmu.Lock()
	defer f.hmu.Unlock()
	if f.holders == nil {
		f.holders = map[*registration]struct{}{}
	}
	f.holders[r] = struct{}{}
	r.catchUp, r.record, r.gen = f.hasRecord, f.record, f.gen
	return func() {
		f.hmu.Lock()
		defer f.hmu.Unlock()
		fl := f.floorLocked(r)
		delete(f.holders, r)
		if f.capped {
			fl = min(f.limit, fl)
		}
		f.limit, f.capped = fl, true
		f.gen++
		f.caughtUp = false
	}
}

// floorLocked returns r's floor (see the top of the file); f.hmu is held.
func (f *feed) floorLocked(r *registration) uint64 {
	switch {
	case r.replayed.Load():
		return r.pos.Load()
	case r.catchUp:
		return r.record
	default:
		return f.committed
	}
}

// hold returns the hold (see the top of the file). It lifts the cap once
// a registration that joined under it has caught up, or when over (the
// record's budget is spent: catchup.go), and none is catching up.
func (f *feed) hold(head uint64, over bool) uint64 {
	f.hmu.Lock()
	defer f.hmu.Unlock()
	h, catching := head, false
	for r := range f.holders {
		h = min(h, f.floorLocked(r))
		switch {
		case !r.catchUp:
		case !r.replayed.Load():
			catching = true
		case r.gen == f.gen:
			f.caughtUp = true
		}
	}
	if f.capped && !catching && (f.caughtUp || over) {
		f.capped = false
		if !f.caughtUp {
			f.opts.Logger.Info("no handler caught up while the file's events grew past the record's budget: the events after the record are retained as any others",
				"resource", f.res.String(), "record", f.limit)
		}
	}
	if f.capped {
		h = min(h, f.limit)
	}
	return h
}

// retain commits the hold and trims f's journal under p until ctx is done
// (see the top of the file); a zero p commits only. It records p in the
// file (Settings.SetRetention) for tools.
func (f *feed) retain(ctx context.Context, p journal.Retention, o *Options) error {
	if err := f.j.Settings().SetRetention(p); err != nil {
		return err
	}
	if err := f.j.Consumers().Create(RetentionConsumer, 0); err != nil && !errors.Is(err, journal.ErrConsumerExists) {
		return err
	}
	last, err := f.j.Consumers().Committed(RetentionConsumer)
	if err != nil {
		return err
	}
	f.hmu.Lock()
	f.committed = last
	f.hmu.Unlock()
	interval := o.retentionInterval()
	var c *compactor.Compactor
	if p != (journal.Retention{}) {
		c = compactor.New(f.j, p, compactor.Options{Logger: o.Logger.WithValues("resource", f.res.String())})
	}
	// commit commits the hold when it moved (a write transaction).
	commit := func(head uint64) error {
		over := false
		if c != nil && f.holdCapped() {
			n, err := f.j.Settings().JournalBytes()
			if err != nil {
				return err
			}
			over = n > recordBudget(p)
		}
		h := f.hold(head, over)
		if h == last {
			return nil
		}
		if err := f.j.Consumers().Reset(RetentionConsumer, h); err != nil {
			return err
		}
		last = h
		f.hmu.Lock()
		f.committed = h
		f.hmu.Unlock()
		return nil
	}
	for {
		round := time.Now()
		head, err := f.j.Head()
		if err != nil {
			return err
		}
		if err := commit(head); err != nil {
			return err
		}
		if c != nil {
			if _, err := c.Trim(); err != nil {
				return err
			}
		}
		wctx, cancel := context.WithTimeout(ctx, interval)
		_ = f.j.Wait(wctx, head)
		cancel()
		if gap := min(retentionGap, interval) - time.Since(round); gap > 0 {
			t := time.NewTimer(gap)
			select {
			case <-ctx.Done():
				t.Stop()
			case <-t.C:
			}
		}
		if ctx.Err() != nil {
			if o.hooks.noRetainFinalCommit { // a SIGKILL-like stop (testhooks.go)
				return nil
			}
			head, err := f.j.Head()
			if err != nil {
				return err
			}
			return commit(head)
		}
	}
}

// holdCapped reports whether the hold is capped (catchup.go).
func (f *feed) holdCapped() bool {
	f.hmu.Lock()
	defer f.hmu.Unlock()
	return f.capped
}
