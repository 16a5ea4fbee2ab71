package jcache

// The replay's pipeline: chunks read from disk, decoded on all cores,
// delivered in key order.
//
// A replay (and a resync, handler.go) hands every stored object to the
// handler one at a time, in key order. On a restart that is what the
// controller waits for (a registration syncs only after its last initial
// OnAdd), and decoding the stored objects is most of its CPU, so the work is
// split in three:
//
//   - reader (one goroutine): readChunk after readChunk; each chunk is cut
//     into batches of decodeBatch objects, queued for the workers, then
//     passed on, in order, to the deliverer. Reading chunk n+1 overlaps
//     with decoding and delivering chunk n.
//   - workers (GOMAXPROCS goroutines): decode a batch (informer.decode,
//     the transform included), drop its stored bytes, mark it done.
//   - deliverer (the caller: the registration's goroutine): takes the
//     chunks in order and, within each, waits for each object's batch
//     and calls the handler; so the handler is called exactly as by a
//     serial replay: same order, one call at a time, same goroutine.
//
// Memory: the reader is at most chunksAhead chunks ahead of the
// deliverer (one queued, one it holds), so at most chunksAhead+1 chunks
// (each at most Options.replayChunk objects or replayBytes of stored bytes) are
// in memory as stored bytes; and at most aheadBatches() batches of
// decodeBatch objects are decoded and not yet delivered (a token per
// batch, taken before the batch is queued for a worker and given back
// once the deliverer took the batch's last object), so the decoded
// objects in memory are bounded by 4 × GOMAXPROCS × decodeBatch, not by
// the chunk: a serial replay held one.
//
// Errors: a chunk that cannot be read is the reader's last; its error is
// returned when the deliverer reaches it. An object that does not decode
// is returned as an error at its place: the objects before it are
// delivered first and none after it, as by a serial replay.
//
// Stopping: when the deliverer returns (done, an error, or its context
// ended) the pipeline's context is cancelled and every goroutine has
// returned before eachChunk does.

import (
	"context"
	goruntime "runtime"
	"sync"

	"k8s.io/apimachinery/pkg/runtime"
)

// decodeBatch is how many objects a worker decodes at a time;
// chunksAhead how many chunks the reader may be ahead of the deliverer.
const (
	decodeBatch = 64
	chunksAhead = 2
)

// replayJob is one chunk of a replay or resync.
type replayJob struct {
	objs []stored // the chunk's objects; obj is dropped once decoded
	head uint64   // the head the chunk is current with
	end  bool     // the chunk reaches the end of the index
	err  error    // reading the chunk failed: the last job

	out  []runtime.Object // decoded objects, by position
	errs []error          // decode errors, by position
	done []chan struct{}  // per batch of decodeBatch objects, closed once decoded

	ahead chan struct{} // the pipeline's decode tokens: one per batch decoded and not yet delivered
}

// aheadBatches is how many batches may be decoded ahead of the
// deliverer.
func aheadBatches() int { return 4 * goruntime.GOMAXPROCS(0) }

// object waits for object i of the chunk to be decoded and returns it,
// or its decode error; ctx ends the wait.
func (c *replayJob) object(ctx context.Context, i int) (runtime.Object, error) {
	select {
	case <-c.done[i/decodeBatch]:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	o, err := c.out[i], c.errs[i]
	c.out[i] = nil
	if i == len(c.objs)-1 || (i+1)%decodeBatch == 0 {
		<-c.ahead // the batch's last object: its token back
	}
	return o, err
}

// objects calls fn with each of the chunk's objects in order, as object
// gives them (pctx ends the waits), and returns the first decode error;
// it returns nil without going on once ctx is done.
func (c *replayJob) objects(ctx, pctx context.Context, fn func(runtime.Object)) error {
	for i := range c.objs {
		o, err := c.object(pctx, i)
		if ctx.Err() != nil {
			return nil
		}
		if err != nil {
			return err
		}
		fn(o)
	}
	return nil
}

// lastKey returns the key of the chunk's last object ("" when empty).
func (c *replayJob) lastKey() string {
	if len(c.objs) == 0 {
		return ""
	}
	return c.objs[len(c.objs)-1].key
}

type decodeTask struct {
	job      *replayJob
	from, to int
}

// eachChunk reads the stored objects chunk by chunk, decodes them on
// GOMAXPROCS workers, and calls fn for each chunk in key order, on the
// caller's goroutine; fn takes the chunk's objects with job.object. It
// returns the first error of reading or of fn; a chunk's read error is
// returned once fn had every chunk before it.
func (r *registration) eachChunk(ctx context.Context, fn func(ctx context.Context, job *replayJob) error) error {
	pctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	defer wg.Wait()
	defer cancel()

	tasks := make(chan decodeTask, 4*goruntime.GOMAXPROCS(0))
	jobs := make(chan *replayJob, chunksAhead-1)
	ahead := make(chan struct{}, aheadBatches())
	for range goruntime.GOMAXPROCS(0) {
		wg.Go(func() {
			for {
				select {
				case <-pctx.Done():
					return
				case t := <-tasks:
					r.decodeBatch(t)
				}
			}
		})
	}
	wg.Go(func() {
		defer close(jobs)
		after, first := "", true
		for {
			objs, head, end, err := r.readChunk(after, first)
			job := &replayJob{objs: objs, head: head, end: end || len(objs) == 0, err: err, ahead: ahead}
			if err == nil {
				job.out, job.errs = make([]runtime.Object, len(objs)), make([]error, len(objs))
				for from := 0; from < len(objs); from += decodeBatch {
					job.done = append(job.done, make(chan struct{}))
				}
			}
			// The deliverer gets the chunk first, so that it can give
			// tokens back while the reader waits for them.
			select {
			case jobs <- job:
			case <-pctx.Done():
				return
			}
			for b := range job.done { // none when the read failed
				t := decodeTask{job: job, from: b * decodeBatch, to: min((b+1)*decodeBatch, len(objs))}
				select {
				case ahead <- struct{}{}:
				case <-pctx.Done():
					return
				}
				select {
				case tasks <- t:
				case <-pctx.Done():
					return
				}
			}
			if job.err != nil || job.end {
				return
			}
			after, first = job.lastKey(), false
		}
	})

	for job := range jobs {
		if job.err != nil {
			return job.err
		}
		if err := fn(pctx, job); err != nil {
			return err
		}
		if ctx.Err() != nil {
			return nil
		}
	}
	return nil
}

// decodeBatch decodes objects [t.from, t.to) of t's chunk.
func (r *registration) decodeBatch(t decodeTask) {
	c := t.job
	for i := t.from; i < t.to; i++ {
		c.out[i], c.errs[i] = r.inf.decode(c.objs[i].obj)
		c.objs[i].obj = nil
	}
	close(c.done[t.from/decodeBatch])
}
