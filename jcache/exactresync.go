package jcache

// Resync of an Exact source on the cache's SyncPeriod
// (cache.Options.SyncPeriod), as an informer resyncs its handlers:
// controllers that repair drift on it get it from Exact sources too. Every
// stored object is queued again as an update, old and new the same
// object.
//
// A resync does not hold the feed. Its objects are read and decoded by a
// goroutine of its own (the replay pipeline, replaypipe.go) and handed
// over a bounded channel; each round of the feed gives the resync at most
// half of the room below MaxPending (with one request of room, every
// other round) and reads the journal's events with the rest. So a resync
// of any number of objects, paced by the reconciles, never keeps an event
// from the queue for longer than a round, as controller-runtime's
// priority queue lets events pass a resync's requests.
//
// Offsets. Each resync request is recorded at the offset of the next
// event the feed has not read (pos+1), so the commit point stays below it
// until it reconciled (a crash before then repeats the events after pos,
// not the resync); offsets stay in order, as pos only grows.
//
// An object is read at its chunk's head: an event of its key appended
// since may have been given first, and the resync's update then carries
// the older object as old and new (predicates that compare the two see no
// change; the request names the key and the reconcile reads the cache).

import (
	"context"
	"sync"

	"k8s.io/apimachinery/pkg/runtime"
)

// resyncAhead bounds the decoded objects a resync holds beyond the
// pipeline's chunks, waiting for room.
const resyncAhead = 256

// resyncRun is one resync in progress.
type resyncRun struct {
	objs   chan runtime.Object // closed once every object was sent, or on an error
	err    error               // the read's error; set before objs is closed
	cancel context.CancelFunc
	wg     sync.WaitGroup
	next   runtime.Object // received from objs by a wait, not yet given
	closed bool           // objs was found closed
	n      int            // objects given
	turn   bool           // with one request of room: the resync's round
}

// startResync starts reading every stored object of inf's file for a
// resync.
func startResync(ctx context.Context, inf *informer) *resyncRun {
	rctx, cancel := context.WithCancel(ctx)
	r := &resyncRun{objs: make(chan runtime.Object, resyncAhead), cancel: cancel}
	r.wg.Go(func() {
		defer close(r.objs)
		r.err = newRegistration(inf, nil, 0).eachChunk(rctx, func(pctx context.Context, job *replayJob) error {
			return job.objects(rctx, pctx, func(o runtime.Object) {
				select {
				case r.objs <- o:
				case <-rctx.Done():
				}
			})
		})
	})
	return r
}

// share returns how many of room requests this round gives the resync:
// half, or with one request every other round.
func (r *resyncRun) share(room int) int {
	if room > 1 {
		return room / 2
	}
	r.turn = !r.turn
	if r.turn {
		return room
	}
	return 0
}

// give hands up to n objects that are ready to eh as updates, waiting for
// none; it reports how many it gave and whether the resync has given
// every object (then finish).
func (r *resyncRun) give(eh *exactHandler, n int) (given int, done bool) {
	for given < n {
		o := r.next
		r.next = nil
		if o == nil && !r.closed {
			select {
			case v, ok := <-r.objs:
				o, r.closed = v, !ok
			default:
				return given, false
			}
		}
		if r.closed {
			return given, true
		}
		eh.OnUpdate(o, o)
		given++
		r.n++
	}
	return given, false
}

// ready returns the channel a wait receives the next object from (nil
// once one is held, or when objs is closed: ready at once), and receive
// keeps what it got.
func (r *resyncRun) ready() <-chan runtime.Object {
	if r.next != nil || r.closed {
		return nil
	}
	return r.objs
}

// receive keeps o, received from ready's channel (ok false: closed).
func (r *resyncRun) receive(o runtime.Object, ok bool) {
	r.next, r.closed = o, !ok
}

// pending reports whether a round can give something without waiting.
func (r *resyncRun) pending() bool { return r.next != nil || r.closed }

// finish waits for the reader and returns its error.
func (r *resyncRun) finish() error {
	r.wg.Wait()
	r.cancel()
	return r.err
}

// stop ends the resync where it is.
func (r *resyncRun) stop() {
	r.cancel()
	r.wg.Wait()
}
