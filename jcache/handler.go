package jcache

// registration: one handler of an informer, fed from the journal file.
//
// Replay. A handler first gets OnAdd(obj, true) for every stored object,
// read from disk before the server is reached, in chunks of at most
// Options.replayChunk objects or replayBytes bytes, each chunk one read
// transaction at its own head offset h_c (a bbolt read transaction is not
// held while the handler runs: a long one would hold back the writer's
// remap). Chunks cover consecutive key ranges, so after the replay the
// handler has seen key k as of the head of the chunk whose range holds k.
// The chunks are read ahead and decoded on all cores, the handler called
// in key order from one goroutine (replaypipe.go).
//
// Catch-up (catchup.go). On a file that records where its handlers were
// last current (a restart), each chunk's OnAdds are preceded by
// OnDelete(DeletedFinalStateUnknown) for the keys of its range deleted
// since (and not back with the same UID at the chunk's head). Of a
// sharded resource only those of the range its filter applies: the rest
// of the filter's first range gets them when it grows into it
// (shardtakeover.go, "A restart").
//
// Follow. Then it reads the journal from the first chunk's head + 1 and
// skips an event at offset o for key k when o ≤ h_c of k's chunk (the
// replay already showed its outcome); past the last chunk's head nothing
// is skipped. The first event it delivers for a key is therefore the one
// right after the state the handler saw, so its old object (below) is the
// object the handler last got. Past the file's head, it is given the
// watch's batch in flight, before its commit (tail.go): pos, which
// retention and the handlers' record read, moves only over committed
// events; tpos marks what the tail gave, not given again when the commit
// is read back (unless the batch was aborted).
//
//   - ADDED: OnAdd(obj, false).
//   - MODIFIED: OnUpdate(old, new), old read from the key's previous
//     event (journal.Event.PrevOffset: labels, data, status as they were)
//     or, when retention trimmed that record, the copy trimming kept of it
//     (see Retention below); a metadata-only object (name, namespace, UID,
//     previous resourceVersion) only when the file holds neither.
//   - DELETED: OnDelete(last object): the event's own object (a watch
//     DELETED carries the final object; a DELETED a relist inferred, a
//     tombstone, carries the key's last stored object, which the journal
//     stores with it in a file that keeps objects), else the key's
//     previous event's object; a DELETED a relist inferred
//     (Event.Synthesized) is wrapped in toolscache.DeletedFinalStateUnknown
//     {Key, Obj: last object}, as an informer does for deletes it finds by
//     relisting.
//
// Resync (a resync period > 0, from SyncPeriod or the handler's own): each
// period, the stored objects are replayed as OnUpdate(obj, obj), chunk by
// chunk; before each chunk the journal's events up to that chunk's head
// are delivered, so a resync never shows a state the events have not.
//
// Retention (retention.go). A running handler holds retention at the
// offset it has delivered, so the events it follows are never trimmed
// under it; the old object of a MODIFIED whose previous record was
// trimmed is the copy trimming kept (ObjectView.Previous, checked against
// the event). A handler behind a trim above the hard cap
// (Retention.HardMaxBytes, off by default) or an external one (journalctl)
// gets ErrTrimmed and stops, the error logged: which deletes it missed is
// not known without the keys it saw. A relist-inferred DELETED keeps the
// key's last object though its records were trimmed: the journal stores
// it with the DELETED, read in the same transaction, before the DELETED
// removes the key's copy (journal.Event.Object). Only a DELETED written
// before it did so, by an older build, whose previous record was trimmed
// gets a metadata-only object in its DeletedFinalStateUnknown.
//
// HasSynced: the replay is done, the loop has synced (reconcile's true
// HasSynced), and the handler has been given every event up to the
// loop's SyncedOffset.

import (
	"context"
	"encoding/json"
	"errors"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"k8s.io/apimachinery/pkg/runtime"
	toolscache "k8s.io/client-go/tools/cache"

	"github.com/watchjournal/watchjournal/journal"
)

// replayBytes bounds a replay chunk in bytes of stored objects (its bound
// in objects is the cache's Options.replayChunk).
const replayBytes = 4 << 20

type registration struct {
	inf    *informer
	h      toolscache.ResourceEventHandler // sf when the resource is sharded
	sf     *shardFilter                    // nil unless the resource is sharded (shardfilter.go)
	resync time.Duration
	// chunk bounds a replay chunk in objects: the cache's
	// Options.replayChunk, read when the handler was added.
	chunk int

	cancel context.CancelFunc // set by startHandlerLocked
	done   chan struct{}      // closed when run returns

	replayed atomic.Bool
	synced   atomic.Bool   // HasSynced was true
	pos      atomic.Uint64 // last committed offset delivered (or skipped)
	// tpos is the last offset given from the tail before its commit
	// (tail.go), under the tail's abort count taborts; events up to it
	// are not given again when read back from the file, unless a batch
	// was aborted since. Used by run's goroutine only.
	tpos, taborts uint64

	// Set by holdFrom, under the feed's hmu: whether the registration
	// catches up from the file's record (catchup.go), the record and its
	// generation (feed.gen).
	catchUp bool
	record  uint64
	gen     uint64

	mu       sync.Mutex
	progress chan struct{} // closed and replaced when pos or replayed change
}

func newRegistration(inf *informer, h toolscache.ResourceEventHandler, resync time.Duration) *registration {
	r := &registration{inf: inf, h: h, resync: resync, chunk: inf.options().replayChunk(), done: make(chan struct{}), progress: make(chan struct{})}
	if inf.shard != nil {
		r.sf = newShardFilter(inf.shard, inf.f, h)
		r.h = r.sf
	}
	return r
}

func (r *registration) advanced() {
	r.mu.Lock()
	close(r.progress)
	r.progress = make(chan struct{})
	r.mu.Unlock()
}

// HasSynced: see the top of the file.
// Once true it stays true, as client-go's does, while a ranged feed's
// loop is replaced (feedrange.go).
func (r *registration) HasSynced() bool {
	if r.synced.Load() {
		return true
	}
	if !r.replayed.Load() || r.inf.f == nil {
		return false
	}
	st := r.inf.f.loop().Status()
	ok := st.Synced && r.pos.Load() >= st.SyncedOffset
	if ok {
		r.synced.Store(true)
	}
	return ok
}

// HasSyncedChecker returns a DoneChecker closed once HasSynced: the
// loop's sync first (it changes no pos when no event follows it: a quiet
// resume), then the handler's progress.
func (r *registration) HasSyncedChecker() toolscache.DoneChecker {
	return r.inf.f.doneChecker("jcache handler", r.HasSynced, func() <-chan struct{} {
		r.mu.Lock()
		defer r.mu.Unlock()
		return r.progress
	}, r.done)
}

// chunk is a replayed key range (after, last] ("" last: to the end) read
// at head.
type chunk struct {
	last string
	head uint64
}

// stored is one object copied out of a read transaction.
type stored struct {
	key string
	obj []byte
}

// readChunk reads the objects after key after (all from the start when
// first), at most r.chunk objects or replayBytes, and returns them, the head they
// are current with and whether they reach the end of the index.
//
// The keys come from Journal.ScanIndex, which seeks to after; their
// objects from one ObjectView at head h. The two are separate read
// transactions, so the chunk counts only when the head before the index
// scan is h: every change to the index appends an event, so the index
// was the same in both. Under writes that keep moving the head it tries
// again, then falls back to scanChunk (one transaction, but it walks the
// keys before after again: ObjectView has no seek).
func (r *registration) readChunk(after string, first bool) (objs []stored, head uint64, end bool, err error) {
	j := r.inf.f.j
	for range 3 {
		h0, err := j.Head()
		if err != nil {
			return nil, 0, false, err
		}
		entries, err := j.ScanIndex(after, r.chunk)
		if err != nil {
			return nil, 0, false, err
		}
		objs, end = objs[:0], len(entries) < r.chunk
		same := false
		size := 0
		err = j.ViewObjects(func(v *journal.ObjectView) error {
			head = v.Head()
			if head != h0 {
				return nil
			}
			same = true
			for _, e := range entries {
				if size >= replayBytes {
					end = false
					return nil
				}
				b, ok, err := v.Get(e.Key)
				if err != nil {
					return err
				}
				if !ok {
					return &journal.NoObjectError{Key: e.Key}
				}
				objs = append(objs, stored{key: e.Key, obj: append([]byte(nil), b...)})
				size += len(b)
			}
			return nil
		})
		if err != nil {
			return nil, 0, false, err
		}
		if same {
			return objs, head, end, nil
		}
	}
	return r.scanChunk(after, first)
}

// scanChunk is readChunk in one read transaction, walking the keys from
// the first.
func (r *registration) scanChunk(after string, first bool) (objs []stored, head uint64, end bool, err error) {
	size := 0
	end = true
	err = r.inf.f.j.ViewObjects(func(v *journal.ObjectView) error {
		head = v.Head()
		return v.Scan("", func(k string, b []byte) (bool, error) {
			if !first && k <= after {
				return true, nil
			}
			if b == nil {
				return false, &journal.NoObjectError{Key: k}
			}
			if len(objs) >= r.chunk || size >= replayBytes {
				end = false
				return false, nil
			}
			objs = append(objs, stored{key: k, obj: append([]byte(nil), b...)})
			size += len(b)
			return true, nil
		})
	})
	return objs, head, end, err
}

// run feeds the handler until ctx is done or the journal is closed.
func (r *registration) run(ctx context.Context) {
	defer close(r.done)
	defer r.inf.f.holdFrom(r)()
	if r.sf != nil {
		r.sf.start()
		defer r.sf.stop()
	}
	r.warnQueueSize()
	err := r.feed(ctx)
	if err != nil && ctx.Err() == nil && !errors.Is(err, journal.ErrClosed) {
		r.inf.log.Error(err, "feeding an event handler from the journal stopped", "resource", r.inf.f.res.String())
	}
}

func (r *registration) feed(ctx context.Context) error {
	// Replay, with the deletes owed since the file's record (catchup.go).
	var cu *catchUp
	if r.catchUp {
		cu = newCatchUp(r.inf, r.record)
	}
	// And those of a range taken over before the handler started
	// (shardtakeover.go).
	tcu, tdels, err := r.replayTakeovers()
	if err != nil {
		return err
	}
	var chunks []chunk
	err = r.eachChunk(ctx, func(pctx context.Context, job *replayJob) error {
		if cu != nil {
			if err := cu.chunk(ctx, r.h, job.head, job.lastKey(), job.end); err != nil || ctx.Err() != nil {
				return err
			}
		}
		if tcu != nil {
			tdels.head = job.head
			if err := tcu.chunk(ctx, tdels, job.head, job.lastKey(), job.end); err != nil || ctx.Err() != nil {
				return err
			}
		}
		if err := job.objects(ctx, pctx, func(o runtime.Object) { r.h.OnAdd(o, true) }); err != nil || ctx.Err() != nil {
			return err
		}
		c := chunk{head: job.head}
		if !job.end {
			c.last = job.lastKey()
		}
		chunks = append(chunks, c)
		return nil
	})
	if err != nil || ctx.Err() != nil {
		return err
	}
	if cu != nil && cu.given > 0 {
		r.inf.log.Info("gave a handler the deletes made since the file's handlers were last current",
			"resource", r.inf.f.res.String(), "deletes", cu.given, "record", r.record)
	}
	if r.sf != nil {
		r.sf.replayed(r.catchUp, r.record)
	}
	r.pos.Store(chunks[0].head)
	r.replayed.Store(true)
	r.advanced()
	r.inf.f.releaseMapped("a replay")
	skip := func(e journal.Event) bool {
		if r.sf != nil && r.sf.skip(e) {
			return true
		}
		if len(chunks) == 0 || e.Offset > chunks[len(chunks)-1].head {
			return false
		}
		i := sort.Search(len(chunks), func(i int) bool { return chunks[i].last == "" || e.Key <= chunks[i].last })
		return i < len(chunks) && e.Offset <= chunks[i].head
	}

	// Follow.
	var tick <-chan time.Time
	if r.resync > 0 {
		t := time.NewTicker(r.resync)
		defer t.Stop()
		tick = t.C
	}
	var reshard <-chan struct{} // the shard group's next change (shardfilter.go)
	if r.sf != nil {
		reshard = r.sf.changed
	}
	for {
		staged := r.inf.f.tail.wait()
		if err := r.deliver(ctx, 0, skip); err != nil {
			return err
		}
		if err := r.deliverStaged(ctx, skip); err != nil {
			return err
		}
		if chunks != nil && r.pos.Load() >= chunks[len(chunks)-1].head {
			chunks = nil
		}
		if r.sf != nil && r.pos.Load() >= r.sf.enteredAt {
			r.sf.entered = nil
		}
		wctx, cancel := context.WithCancel(ctx)
		waitErr := make(chan error, 1)
		go func() { waitErr <- r.inf.f.j.Wait(wctx, r.pos.Load()) }()
		select {
		case err := <-waitErr:
			cancel()
			if ctx.Err() != nil {
				return nil
			}
			if err != nil {
				return err
			}
		case <-staged:
			cancel()
			<-waitErr
		case <-tick:
			cancel()
			<-waitErr
			if err := r.resyncAll(ctx, skip); err != nil {
				return err
			}
		case <-reshard:
			cancel()
			<-waitErr
			if err := r.sf.apply(ctx, r, skip); err != nil {
				return err
			}
			reshard = r.sf.changed
		}
	}
}

// deliver hands the events after pos to the handler, up to offset upTo
// (0: the head), and advances pos.
func (r *registration) deliver(ctx context.Context, upTo uint64, skip func(journal.Event) bool) error {
	for {
		if ctx.Err() != nil {
			return nil
		}
		from := r.pos.Load() + 1
		if upTo != 0 && from > upTo {
			return nil
		}
		evs, err := r.inf.f.j.Read(from, journal.DefaultBatch)
		if err != nil {
			return err
		}
		if len(evs) == 0 {
			if staged, _, _ := r.inf.f.tail.after(r.pos.Load()); staged == nil {
				r.inf.decoded.clear() // at the head: nothing left to take (decoded.go)
			}
			return nil
		}
		// Read, then the abort count: events read up to tpos are the
		// batch given from the tail only if it has not been aborted
		// (tail.go).
		if n := r.inf.f.tail.abortCount(); n != r.taborts {
			r.tpos, r.taborts = 0, n
		}
		for _, e := range evs {
			if upTo != 0 && e.Offset > upTo {
				return nil
			}
			if ctx.Err() != nil {
				return nil
			}
			if !skip(e) && e.Offset > r.tpos {
				r.inf.f.readObject(len(e.Object))
				if err := r.inf.dispatch(e, r.h); err != nil {
					return err
				}
			}
			r.pos.Store(e.Offset)
		}
		r.advanced()
	}
}

// deliverStaged hands the handler the tail's events (tail.go) that
// follow what it has been given, before they commit. pos does not move:
// it counts committed events only.
func (r *registration) deliverStaged(ctx context.Context, skip func(journal.Event) bool) error {
	evs, olds, aborts := r.inf.f.tail.after(max(r.pos.Load(), r.tpos))
	if aborts != r.taborts {
		// A batch given from the tail was aborted: its offsets come
		// again from the file, with what the server sends again.
		r.tpos, r.taborts = 0, aborts
		evs, olds, _ = r.inf.f.tail.after(r.pos.Load())
	}
	for k, e := range evs {
		if ctx.Err() != nil {
			return nil
		}
		if !skip(e) {
			old := olds[k]
			if err := r.inf.dispatchPrev(e, r.h, func(journal.Event) ([]byte, error) { return old, nil }); err != nil {
				return err
			}
		}
		r.tpos = e.Offset
	}
	return nil
}

// dispatch calls h for one event (see the top of the file): the Exact
// sources (exact.go) use it too.
func (i *informer) dispatch(e journal.Event, h toolscache.ResourceEventHandler) error {
	return i.dispatchPrev(e, h, i.previous)
}

// dispatchPrev is dispatch with the object before e read by previous
// (the tail's events carry theirs: tail.go).
func (i *informer) dispatchPrev(e journal.Event, h toolscache.ResourceEventHandler, previous func(journal.Event) ([]byte, error)) error {
	switch e.Type {
	case journal.Added:
		o, err := i.object(e, e.Object, e.ResourceVersion)
		if err != nil {
			return err
		}
		i.recent.put(e.Key, e.Object, o)
		h.OnAdd(o, false)
	case journal.Modified:
		o, err := i.object(e, e.Object, e.ResourceVersion)
		if err != nil {
			return err
		}
		i.recent.put(e.Key, e.Object, o)
		prev, err := previous(e)
		if err != nil {
			return err
		}
		old, err := i.object(e, prev, e.PrevResourceVersion)
		if err != nil {
			return err
		}
		h.OnUpdate(old, o)
	case journal.Deleted:
		o, err := i.lastObject(e, previous)
		if err != nil {
			return err
		}
		if e.Synthesized() {
			h.OnDelete(toolscache.DeletedFinalStateUnknown{Key: e.Key, Obj: o})
		} else {
			h.OnDelete(o)
		}
	}
	return nil
}

// lastObject returns the last object of DELETED e: its own, else its
// key's previous event's, else a metadata-only one (see the top of the
// file).
func (i *informer) lastObject(e journal.Event, previous func(journal.Event) ([]byte, error)) (runtime.Object, error) {
	b := e.Object
	if b == nil {
		var err error
		if b, err = previous(e); err != nil {
			return nil, err
		}
	}
	return i.object(e, b, e.ResourceVersion)
}

// previous returns the object of e's key's previous event (PrevOffset):
// the record, or the copy retention trimming kept of it
// (ObjectView.Previous); nil when neither is held or it is not known.
func (i *informer) previous(e journal.Event) ([]byte, error) {
	if e.PrevOffset == 0 {
		return nil, nil
	}
	var b []byte
	err := i.f.j.ViewObjects(func(v *journal.ObjectView) error {
		o, ok, err := v.Previous(e)
		if ok {
			b = append([]byte(nil), o...)
		}
		return err
	})
	return b, err
}

// object decodes b (or takes the object an index function decoded from
// the same bytes, decoded.go), or, when b is nil, a metadata-only object
// of e's key at resourceVersion rv.
func (i *informer) object(e journal.Event, b []byte, rv string) (runtime.Object, error) {
	if b != nil {
		if o := i.decoded.take(b); o != nil {
			return o, nil
		}
	}
	if b == nil {
		kind, apiVersion, err := i.f.j.TypeMeta()
		if err != nil {
			return nil, err
		}
		ns, name, found := strings.Cut(e.Key, "/")
		if !found {
			ns, name = "", e.Key
		}
		b, _ = json.Marshal(map[string]any{
			"kind": kind, "apiVersion": apiVersion,
			"metadata": map[string]any{"name": name, "namespace": ns, "uid": e.UID, "resourceVersion": rv},
		})
	}
	return i.decode(b)
}

// resyncAll replays the stored objects as OnUpdate(obj, obj), chunk by
// chunk (read ahead and decoded on all cores, replaypipe.go), delivering
// the events up to each chunk's head first.
func (r *registration) resyncAll(ctx context.Context, skip func(journal.Event) bool) error {
	return r.eachChunk(ctx, func(pctx context.Context, job *replayJob) error {
		if err := r.deliver(ctx, job.head, skip); err != nil {
			return err
		}
		return job.objects(ctx, pctx, func(o runtime.Object) { r.h.OnUpdate(o, o) })
	})
}
