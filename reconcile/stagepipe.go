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
// Rules that keep it the same relist as a synchronous one:
//   - at most one Stage runs; the next waits for it (batches stay in order,
//     and memory holds two batches at most: the one being written and the
//     one being read);
//   - nothing else touches the Relist while a Stage runs: wait comes first
//     (lookups of an unordered list, the tail, the commit, the abort);
//   - the diff of the next batch reads the index only after the last key
//     of the batch being written (diffRange), which a direct Stage does not
//     change, and bbolt serves that read beside the write;
//   - a Stage's error is returned by the next stage or wait, before the
//     commit, so a failed write never commits.

import (
	"github.com/watchjournal/watchjournal/journal"
)

// stagePipe stages batches of a relist one at a time on another goroutine.
// The zero value is ready; it is not safe for concurrent use.
type stagePipe struct {
	busy bool
	done chan error
}

// stage waits for the batch before it, then starts rel.Stage(evs) and
// returns; evs must not be touched until the next stage or wait returns.
func (p *stagePipe) stage(rel *journal.Relist, evs []journal.Event) error {
	if err := p.wait(); err != nil {
		return err
	}
	if p.done == nil {
		p.done = make(chan error, 1)
	}
	p.busy = true
	go func() { p.done <- rel.Stage(evs) }()
	return nil
}

// wait returns once no Stage runs, with the error of the last one
// (journalError) if it failed.
func (p *stagePipe) wait() error {
	if !p.busy {
		return nil
	}
	p.busy = false
	if err := <-p.done; err != nil {
		return journalError{err}
	}
	return nil
}
