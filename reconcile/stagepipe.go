package reconcile

// Writing one batch while the next is read.
//
// A streaming list reads its initial events, diffs a batch against the
// index, encodes its objects, and stages it (journal.Relist.Stage: into the
// stage file, or straight into the journal and the index when the index was
// empty). Staging (bbolt puts, record encoding, page writes and fsync) and
// reading plus encoding each take a large share of the client's CPU; on
// one goroutine, the apiserver would wait on a full socket while a batch
// is staged. stagePipe runs each Stage on a
// goroutine of its own, one at a time and in order, so the stream goes on
// being read meanwhile.
//
// Batches handed over while a Stage runs are queued and staged together
// by the next Stage (group commit): a Stage into the journal is a bbolt
// transaction whose cost is mostly fixed (two fdatasyncs, the meta page,
// the freelist), so while the disk is the slower side the transactions
// grow, up to coalesceEvents events or coalesceBytes of objects, and the
// stream is not held back by one fsync pair per batch.
//
// Rules that keep it the same relist as a synchronous one:
//   - at most one Stage runs; batches stay in order (the queue is staged
//     after the running Stage, in the order it was filled), and memory
//     holds the Stage being written and the queue, each at most
//     coalesceEvents events or coalesceBytes of objects (one batch more
//     when one batch is larger), plus the batch being read;
//   - nothing else touches the Relist while a Stage runs or a batch is
//     queued: wait comes first and stages the queue (lookups of an
//     unordered list, the tail, the commit, the abort);
//   - the diff of the next batch reads the index only after the last key
//     of the batches being written or queued (diffRange), which a direct
//     Stage does not change, and bbolt serves that read beside the write;
//   - a Stage's error is returned by the next stage or wait, before the
//     commit, so a failed write never commits.

import (
	"github.com/watchjournal/watchjournal/journal"
)

// The bounds of the events one Stage of the pipe takes (see the top of
// the file): events, and bytes of their objects. The bytes are one full
// batch's (fillBytes), so that a list of large objects holds what it held
// with one batch a Stage, plus the batch queued: its transactions are
// bounded by commitBytes in the journal anyway.
const (
	coalesceEvents = 2000
	coalesceBytes  = fillBytes
)

// stager is the part of a *journal.Relist the pipe uses.
type stager interface {
	Stage(evs []journal.Event) error
}

// stagePipe stages batches of a relist one at a time on another goroutine,
// the batches handed over during a Stage together in the next. The zero
// value is ready; it is not safe for concurrent use.
type stagePipe struct {
	busy bool
	done chan error
	// rel and queued: the batches handed over while a Stage ran, in order,
	// to be staged into rel next; queuedBytes their objects' bytes.
	rel         stager
	queued      []journal.Event
	queuedBytes int
}

// stage hands evs over: it starts rel.Stage with them (and the batches
// queued before) when no Stage runs, queues them when one runs and the
// queue has room, else waits for it first. The events handed over (evs
// included) must not be touched until wait returns.
func (p *stagePipe) stage(rel stager, evs []journal.Event) error {
	p.rel = rel
	p.queued = append(p.queued, evs...)
	for _, e := range evs {
		p.queuedBytes += len(e.Object)
	}
	if p.busy {
		select {
		case err := <-p.done:
			p.busy = false
			if err != nil {
				p.queued, p.queuedBytes = nil, 0 // nothing after a failed Stage is staged
				return journalError{err}
			}
		default:
			if len(p.queued) < coalesceEvents && p.queuedBytes < coalesceBytes {
				return nil // the reader goes on; the queue waits for the running Stage
			}
			if err := p.waitRunning(); err != nil {
				return err
			}
		}
	}
	if p.done == nil {
		p.done = make(chan error, 1)
	}
	q := p.queued
	p.queued, p.queuedBytes, p.busy = nil, 0, true
	go func() { p.done <- rel.Stage(q) }()
	return nil
}

// wait returns once no Stage runs and the queue is staged, with the error
// of the first Stage that failed (journalError).
func (p *stagePipe) wait() error {
	if err := p.waitRunning(); err != nil {
		return err
	}
	if len(p.queued) == 0 {
		return nil
	}
	q := p.queued
	p.queued, p.queuedBytes = nil, 0
	if err := p.rel.Stage(q); err != nil {
		return journalError{err}
	}
	return nil
}

// discard drops the queue and returns once no Stage runs, with its error:
// for a relist that aborts.
func (p *stagePipe) discard() error {
	p.queued, p.queuedBytes = nil, 0
	return p.waitRunning()
}

// waitRunning returns once no Stage runs, with its error (journalError).
func (p *stagePipe) waitRunning() error {
	if !p.busy {
		return nil
	}
	p.busy = false
	if err := <-p.done; err != nil {
		p.queued, p.queuedBytes = nil, 0 // nothing after a failed Stage is staged
		return journalError{err}
	}
	return nil
}
