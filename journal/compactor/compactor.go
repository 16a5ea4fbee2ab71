package compactor

import (
	"context"
	"fmt"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/utils/clock"

	"github.com/watchjournal/watchjournal/journal"
)

// Policy bounds a journal: journal.Retention, so that it can be stored in
// the file with Settings.SetRetention and shown by tools.
type Policy = journal.Retention

// Options tune a Compactor. Zero fields take the defaults given.
type Options struct {
	// Interval is the longest time between two trims when nothing is
	// appended. Default 10 s.
	Interval time.Duration
	// Step is the most events deleted per transaction. Default 1000.
	Step int
	// StepBytes is about the most bytes of events deleted per transaction
	// (one more event may pass it). Default 4 MiB. A file that keeps
	// objects copies a trimmed event's object when it is still its key's
	// latest, in the same transaction, and bbolt holds what a transaction
	// writes on the heap until its commit: the transaction's memory
	// follows the events' bytes, not their count.
	StepBytes int64
	// Logger receives one line, at V(0), per trim that deleted events. The
	// zero Logger discards.
	Logger logr.Logger
	// Clock gives the time for MaxAge and the interval. Default real time.
	Clock clock.WithTicker
}

// Result describes one Trim.
type Result struct {
	// Events is how many events were deleted.
	Events int
	// Bytes is how many payload bytes were deleted.
	Bytes int64
	// First is the first retained offset after the trim (0: journal empty).
	First uint64
	// Forced is true when the hard cap dropped uncommitted events.
	Forced bool
}

// Compactor applies a Policy to a journal. Run it beside the writer.
type Compactor struct {
	j    *journal.Journal
	p    Policy
	opts Options
}

// New returns a Compactor for j. j must be writable.
func New(j *journal.Journal, p Policy, opts Options) *Compactor {
	if opts.Interval <= 0 {
		opts.Interval = 10 * time.Second
	}
	if opts.Step <= 0 {
		opts.Step = 1000
	}
	if opts.StepBytes <= 0 {
		opts.StepBytes = 4 << 20
	}
	if opts.Clock == nil {
		opts.Clock = clock.RealClock{}
	}
	return &Compactor{j: j, p: p, opts: opts}
}

// Run records its policy in the file (Settings.SetRetention: journalctl
// stats and the inspect socket show the retention in effect, read from
// there), then trims after appends (woken by the writer) and at least
// every Interval, until ctx is done; then it returns nil. It returns early
// on a journal error.
func (c *Compactor) Run(ctx context.Context) error {
	if err := c.j.Settings().SetRetention(c.p); err != nil {
		return fmt.Errorf("compactor: record the retention: %w", err)
	}
	for {
		// Head first: an append during the trim then wakes the next one.
		head, err := c.j.Head()
		if err != nil {
			return err
		}
		if _, err := c.Trim(); err != nil {
			return err
		}
		wctx, cancel := context.WithTimeout(ctx, c.opts.Interval)
		_ = c.j.Wait(wctx, head)
		cancel()
		if ctx.Err() != nil {
			return nil
		}
	}
}

// Trim applies the policy once, in transactions of at most Step events.
func (c *Compactor) Trim() (Result, error) {
	var res Result
	st, err := c.j.Stats()
	if err != nil {
		return res, err
	}
	if st.FirstOffset == 0 {
		return res, nil
	}
	// before: events with offsets below it are past the soft limits.
	before := st.FirstOffset
	if c.p.MaxEvents > 0 && st.LastOffset-st.FirstOffset+1 > c.p.MaxEvents {
		before = max(before, st.LastOffset-c.p.MaxEvents+1)
	}
	if c.p.MaxAge > 0 {
		off, err := c.j.OffsetAt(c.opts.Clock.Now().Add(-c.p.MaxAge))
		if err != nil {
			return res, err
		}
		before = max(before, off)
	}
	// Consumers hold retention back to their first uncommitted event.
	protect := st.LastOffset + 1
	for _, off := range st.Consumers {
		protect = min(protect, off+1)
	}
	// Count and age first, then size, oldest first.
	if err := c.trim(&res, min(before, protect), 0, false); err != nil {
		return res, err
	}
	if c.p.MaxBytes > 0 && st.JournalBytes > c.p.MaxBytes {
		if err := c.trim(&res, protect, c.p.MaxBytes, false); err != nil {
			return res, err
		}
	}
	// The hard cap wins over consumers.
	if c.p.HardMaxBytes > 0 {
		left, err := c.j.Settings().JournalBytes()
		if err != nil {
			return res, err
		}
		if left > c.p.HardMaxBytes {
			res.Forced = true
			if err := c.trim(&res, st.LastOffset+1, c.p.HardMaxBytes, true); err != nil {
				return res, err
			}
		}
	}
	if res.Events > 0 {
		st, _ = c.j.Stats()
		c.opts.Logger.Info("retention trimmed the journal", "events", res.Events, "bytes", res.Bytes,
			"firstOffset", st.FirstOffset, "forced", res.Forced)
	}
	res.First = st.FirstOffset
	return res, nil
}

// trim deletes below before, above minBytes, in steps.
// trim deletes events below before, in transactions of at most Step
// events and StepBytes, while the retained size is above minBytes; it
// keeps every event a consumer has not committed, read in each
// transaction (Stats was read before it), unless forced (the hard cap).
func (c *Compactor) trim(res *Result, before, minBytes uint64, forced bool) error {
	w := c.j.Writer()
	for {
		trim := w.TrimRetained
		if forced {
			trim = w.Trim
		}
		n, size, err := trim(before, c.opts.Step, c.opts.StepBytes, minBytes)
		if err != nil {
			return fmt.Errorf("compactor: trim: %w", err)
		}
		res.Events += n
		res.Bytes += size
		if n < c.opts.Step && size < c.opts.StepBytes {
			return nil // nothing more to trim now
		}
	}
}
