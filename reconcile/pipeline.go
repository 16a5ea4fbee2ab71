package reconcile

// The watch's commit pipeline: fsync off the path from a frame to
// Options.Staged.
//
// A bbolt commit fsyncs, and a file has one write transaction at a time.
// Were each batch folded inside its own transaction, a frame arriving
// while a batch commits would wait for that fsync before anyone could
// see it. So the watch plans each batch in memory (plan: the events
// Fold gives against the file as the batches before it leave it, with
// the offsets they will get), shows it to Options.Staged, and only then
// waits for the commit before it, and starts its own commit in a
// goroutine (pipeline.start); it then reads the next frames while that
// commit fsyncs.
//
// Invariants:
//   - At most one commit runs, and at most one planned batch waits for
//     it (pending): the batches planned while a commit runs merge into
//     it, up to BatchLimit events; past that the loop waits for the
//     running commit. Frames hold the watch's byte budget (watchBytes)
//     until their batch's commit returns, and the loop takes a returned
//     commit's result as soon as it comes (committing), so the budget
//     bounds the frames in flight and never stalls the loop.
//   - view holds, for each key an uncommitted batch changed, its state
//     after the last such batch (present, UID, resourceVersion); a key
//     absent from view is the file's, which no batch in flight changes.
//     A key leaves view once the batch of its last change committed.
//   - A commit appends exactly what was planned: it checks each key's
//     state in its transaction against what the plan folded against, and
//     each offset assigned against the planned one; any difference
//     (another writer of the file) fails the commit as errStalePlan, and
//     nothing of it is kept.
//   - A failed commit fails every batch planned after it (their
//     Options.Staged functions are told), and the watch resumes from the
//     file's committed resourceVersion: the server sends those events
//     again. Every exit from the watch waits for the commit in flight, so
//     a state after the watch (a relist, a verify) sees the file as the
//     watch left it, and the resourceVersion it carries is committed.

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"golang.org/x/sync/semaphore"

	"github.com/watchjournal/watchjournal/journal"
)

// errStalePlan is a commit's error when the file is not as the batch was
// planned against (another writer appended or changed a key meanwhile).
var errStalePlan = errors.New("reconcile: the file changed under a planned watch batch")

// keyState is a key's index state as a plan saw it.
type keyState struct {
	entry   journal.IndexEntry
	present bool
	last    uint64 // the offset of the batch's last change of the key (view only)
}

// commitJob is one planned batch: its events, in offset order, with the
// state of each event's key before it, and the resourceVersion it
// commits.
type commitJob struct {
	evs    []journal.Event
	want   []keyState
	rv     string
	counts TypeCounts
	frames []frame
	settle []func(error) // Options.Staged's, one per batch merged in
	proof  []func()      // called once committed

	start time.Time
	done  chan struct{}
	err   error
}

// pipeline is one watch request's commit pipeline.
type pipeline struct {
	l        *Loop
	budget   *semaphore.Weighted
	view     map[string]keyState
	next     uint64 // the next event's offset; 0: read the file's head
	inflight *commitJob
	// pending is planned and staged, and waits for inflight: the batches
	// planned while a commit runs merge into it, up to maxPending events.
	pending    *commitJob
	maxPending int
	ctx        context.Context // the pending commit's
}

func newPipeline(l *Loop, budget *semaphore.Weighted) *pipeline {
	return &pipeline{l: l, budget: budget, view: map[string]keyState{}, maxPending: l.opts.BatchLimit}
}

// lookup returns key's state after the batches planned so far.
func (p *pipeline) lookup(key string) (journal.IndexEntry, bool, error) {
	if v, ok := p.view[key]; ok {
		return v.entry, v.present, nil
	}
	return p.l.j.Lookup(key)
}

// add plans e: its offset, and key's state after it.
func (p *pipeline) add(e *journal.Event) error {
	if p.next == 0 {
		h, err := p.l.j.Head()
		if err != nil {
			return err
		}
		p.next = h + 1
	}
	e.Offset = p.next
	p.next++
	v := keyState{present: e.Type != journal.Deleted, last: e.Offset}
	if v.present {
		v.entry = journal.IndexEntry{Key: e.Key, UID: e.UID, ResourceVersion: e.ResourceVersion}
	}
	p.view[e.Key] = v
	return nil
}

// release gives back the byte budget of frames.
func (p *pipeline) release(frames []frame) {
	for _, f := range frames {
		p.budget.Release(f.weight)
	}
}

// stage shows job's events to Options.Staged, before any commit.
func (p *pipeline) stage(job *commitJob) {
	if p.l.opts.Staged != nil && len(job.evs) > 0 {
		job.settle = append(job.settle, p.l.opts.Staged(slices.Clone(job.evs)))
	}
}

// submit commits job: at once when no commit runs, else once the one
// that runs has returned, merged with the batches planned meanwhile. It
// waits for the running commit only when the merged batch would pass
// maxPending events, and returns that commit's error.
func (p *pipeline) submit(ctx context.Context, job *commitJob) error {
	if p.inflight == nil {
		p.start(ctx, job)
		return nil
	}
	if q := p.pending; q != nil {
		q.evs = append(q.evs, job.evs...)
		q.want = append(q.want, job.want...)
		q.rv = job.rv
		q.counts.Added += job.counts.Added
		q.counts.Modified += job.counts.Modified
		q.counts.Deleted += job.counts.Deleted
		q.frames = append(q.frames, job.frames...)
		q.settle = append(q.settle, job.settle...)
		q.proof = append(q.proof, job.proof...)
	} else {
		p.pending = job
	}
	p.ctx = ctx
	if len(p.pending.evs) >= p.maxPending {
		return p.wait()
	}
	return nil
}

// drain waits until no commit runs or waits.
func (p *pipeline) drain() error {
	for p.inflight != nil {
		if err := p.wait(); err != nil {
			return err
		}
	}
	return nil
}

// start commits job in a goroutine; the commit before it must have
// returned (wait).
func (p *pipeline) start(ctx context.Context, job *commitJob) {
	job.done = make(chan struct{})
	job.start = time.Now()
	p.inflight = job
	go func() { // exits when the commit returns
		defer close(job.done)
		job.err = p.l.commit(ctx, job)
	}()
}

// wait waits for the commit in flight, if any, starts the pending one
// after it, and returns its error; after an error, nothing planned
// stands: the pending batch is failed with it.
func (p *pipeline) wait() error {
	job := p.inflight
	if job == nil {
		return nil
	}
	<-job.done
	p.inflight = nil
	p.l.committed(job.start, job.err)
	for _, f := range job.settle {
		f(job.err)
	}
	p.release(job.frames)
	if job.err != nil {
		if q := p.pending; q != nil {
			p.pending = nil
			p.abort(q, job.err)
		}
		p.view, p.next = map[string]keyState{}, 0
		return job.err
	}
	p.l.update(func(x *Status) {
		x.ResourceVersion = job.rv
		x.Events += len(job.evs)
		x.Journaled.add(journal.OriginWatch, job.counts)
	})
	if n := len(job.evs); n > 0 {
		last := job.evs[n-1].Offset
		for k, v := range p.view {
			if v.last <= last {
				delete(p.view, k)
			}
		}
		if p.next == last+1 {
			p.next = 0 // nothing planned after it: read the head again
		}
	}
	for _, f := range job.proof {
		f()
	}
	if q := p.pending; q != nil {
		p.pending = nil
		p.start(p.ctx, q)
	}
	return nil
}

// committing returns a channel closed when the commit in flight returns;
// nil (never ready) when none is.
func (p *pipeline) committing() <-chan struct{} {
	if p.inflight == nil {
		return nil
	}
	return p.inflight.done
}

// abort fails a planned batch that will not be committed.
func (p *pipeline) abort(job *commitJob, err error) {
	for _, f := range job.settle {
		f(err)
	}
	p.release(job.frames)
}

// commit appends job's events and sets its resourceVersion in one
// transaction, checking that the file is as the plan saw it.
func (l *Loop) commit(ctx context.Context, job *commitJob) error {
	return l.w.Update(func(tx *journal.Tx) error {
		for i := range job.evs {
			e := job.evs[i] // Append sets fields of its own copy
			w := job.want[i]
			cur, present, err := tx.Lookup(e.Key)
			if err != nil {
				return err
			}
			if present != w.present || present && (cur.UID != w.entry.UID || cur.ResourceVersion != w.entry.ResourceVersion) {
				return fmt.Errorf("%w: key %q", errStalePlan, e.Key)
			}
			off, err := tx.Append(&e)
			if err != nil {
				return err
			}
			if off != job.evs[i].Offset {
				return fmt.Errorf("%w: offset %d, planned %d", errStalePlan, off, job.evs[i].Offset)
			}
		}
		if err := tx.SetResourceVersion(job.rv); err != nil {
			return err
		}
		if l.opts.CommitHook != nil {
			return l.opts.CommitHook(ctx)
		}
		return nil
	})
}

// commitFailed returns what a failed commit of the watch s leads to: the
// watch from the file's committed resourceVersion when ctx ended; for a
// full disk or a stale plan, the watch again from the file's committed
// resourceVersion after the backoff (the server sends the lost batches
// again); anything else, ErrJournal.
func (l *Loop) commitFailed(ctx context.Context, s stateWatch, err error) (state, error) {
	w := s.resume()
	if rv, rerr := l.j.ResourceVersion(); rerr == nil && rv != "" {
		w.rv = rv
	}
	if ctx.Err() != nil {
		return w, nil // stopping: the next Run resumes from the file
	}
	if errors.Is(err, journal.ErrNoSpace) || errors.Is(err, errStalePlan) {
		next, _ := l.fail(w, fmt.Errorf("%w: %w", ErrJournal, err))
		return next, nil
	}
	return nil, fmt.Errorf("%w: %w", ErrJournal, err)
}
