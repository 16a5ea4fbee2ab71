package jcache

// shardFilter: one handler of a sharded resource, given only the objects
// of the group's range H (shard.go has what a move looks like).
//
// The filter sits between a registration and its handler: every call
// (replay, events, resync) passes if the object's shard UID hashes into
// the range the filter applies. The range changes only in the
// registration's goroutine (apply), between two deliveries, so a handler
// never sees an event of a range it was not given the objects of:
//
//  1. the events up to the journal's head are delivered under the old
//     range;
//  2. the new range is applied: a key that left gets nothing from here on;
//  3. the stored objects of the part that entered are read in chunks, as
//     a replay reads them (one read transaction per chunk, at its head h:
//     handler.go), and given as OnAdd(obj, false); before each chunk's
//     OnAdds, where the part was another member's (dead, or let go),
//     the deletes made since its publication of the chunk's keys, as of h
//     (shardtakeover.go), and a key given such a delete whose name now
//     holds an object of the range is given that object again, after
//     it; the later delivery skips the events at or below h of the keys
//     given (their outcome is in the OnAdd or the OnDelete);
//  4. the generation is acknowledged, so the group may publish the shrink.
//
// A range grows only once the files of the ranged resources
// (ShardOptions.Owners, feedrange.go) have listed it: until then a child's
// event would enqueue an owner that a read does not find yet, a NotFound
// for an object that exists and is held. So while a ranged file has not
// synced at a range covering the growth, apply applies only the shrink
// and leaves the generation unacknowledged; the file's sync is a change
// of the group (shardGroup.fileSynced) that makes it apply again. A
// filter that joins meanwhile starts with H less what the files have not
// listed, at the generation before H's, so its replay gives none of that
// part and its apply grows into it as any filter's does.

import (
	"context"
	"sync/atomic"

	"k8s.io/apimachinery/pkg/runtime"
	toolscache "k8s.io/client-go/tools/cache"

	"github.com/watchjournal/watchjournal/internal/hashrange"
	"github.com/watchjournal/watchjournal/journal"
)

// shardFilter implements toolscache.ResourceEventHandler over h.
type shardFilter struct {
	g     *shardGroup
	feed  *feed // the file the handler delivers from; nil in unit tests
	h     toolscache.ResourceEventHandler
	set   atomic.Pointer[hashrange.Set] // the range applied; nil: none yet
	acked atomic.Uint64                 // the group's generation applied

	// Owned by the registration's goroutine.
	changed   <-chan struct{}   // closed at the group's next change
	entered   map[string]uint64 // keys given as OnAdd or OnDelete when their range entered, and the head each was read at
	enteredAt uint64            // the highest of those heads
	pending   []takeover        // parts of ranges other members held, not applied yet (shardtakeover.go)
	taken     uint64            // the group's generation up to which pending has the takeovers
	// partial: the filter joined with less than H (none given yet, or a
	// growth deferred: shardgroup.go's join). owesRecord: the handler's
	// replay caught up from the file's record while partial, so the
	// deletes since record of the part the filter grows into next are
	// owed where no takeover gives them (shardtakeover.go, "A restart").
	partial    bool
	owesRecord bool
	record     uint64
}

func newShardFilter(g *shardGroup, fd *feed, h toolscache.ResourceEventHandler) *shardFilter {
	return &shardFilter{g: g, feed: fd, h: h}
}

// start joins the group: the filter applies its current range (less
// what the ranged files have not listed yet), and collects the
// takeovers the group still keeps, for its replay (shardgroup.go's join,
// shardtakeover.go).
func (f *shardFilter) start() {
	set, ch := f.g.join(f)
	f.set.Store(&set)
	f.changed = ch
}

// replayed notes that the handler's replay is done, having caught up from
// the file's record when catchUp (handler.go): the deletes since record
// are owed to the growth that completes the filter's first range.
func (f *shardFilter) replayed(catchUp bool, record uint64) {
	f.owesRecord, f.record = catchUp && f.partial, record
}

// stop leaves the group: the handler no longer delivers anything.
func (f *shardFilter) stop() { f.g.remove(f) }

// holds reports whether obj's shard UID is in the applied range; an
// object without metadata passes (the handler decides).
func (f *shardFilter) holds(obj any) bool {
	uid, ok := shardUID(obj)
	if !ok {
		return true
	}
	s := f.set.Load()
	return s != nil && s.ContainsUID(string(uid))
}

// OnAdd passes a held object.
func (f *shardFilter) OnAdd(obj any, initial bool) {
	if f.holds(obj) {
		f.h.OnAdd(obj, initial)
	}
}

// OnUpdate passes an update of a held object; one whose shard UID changed
// into the range is an OnAdd, out of it nothing.
func (f *shardFilter) OnUpdate(old, obj any) {
	switch was, is := f.holds(old), f.holds(obj); {
	case was && is:
		f.h.OnUpdate(old, obj)
	case is:
		f.h.OnAdd(obj, false)
	}
}

// OnDelete passes the delete of a held object.
func (f *shardFilter) OnDelete(obj any) {
	if f.holds(obj) {
		f.h.OnDelete(obj)
	}
}

// skip reports whether e is a key leaving the file's range (DELETED,
// reason moved: feedrange.go), which is no deletion, or an event whose
// outcome was given by an OnAdd when its key's range entered.
func (f *shardFilter) skip(e journal.Event) bool {
	if movedOut(e) {
		return true
	}
	if f.entered == nil {
		return false
	}
	h, ok := f.entered[e.Key]
	return ok && e.Offset <= h
}

// apply moves the filter to the group's current range (this file's
// comment), in the registration r's goroutine; skip is the delivery's.
func (f *shardFilter) apply(ctx context.Context, r *registration, skip func(journal.Event) bool) error {
	next, gen, ch := f.g.current()
	held := next // H at gen, before a growth is deferred
	f.collect(gen)
	var cur hashrange.Set
	if s := f.set.Load(); s != nil {
		cur = *s
	}
	ready := true
	if grow := next.Minus(cur); !grow.Empty() && !f.g.filesHold(grow) {
		// A ranged file has not listed the part that enters yet: only the
		// shrink now, the growth at a later change (fileSynced).
		next, ready = next.Intersect(cur), false
	}
	entering := next.Minus(cur)
	if !entering.Empty() {
		if err := r.deliver(ctx, 0, skip); err != nil || ctx.Err() != nil {
			return err
		}
	}
	f.set.Store(&next)
	if !entering.Empty() {
		cu, part, err := f.takeoverCatchUp(r, entering, held)
		if err != nil {
			return err
		}
		f.entered, f.enteredAt = map[string]uint64{}, 0
		dels := &takeoverDeletes{f: f, part: part, keys: map[string]bool{}}
		before := func(head uint64, last string, end bool) error {
			if cu == nil {
				return nil
			}
			dels.head = head
			return cu.chunk(ctx, dels, head, last, end)
		}
		want := func(key string, uid string) bool {
			return entering.ContainsUID(uid) || dels.keys[key] && next.ContainsUID(uid)
		}
		if err := r.entering(ctx, want, before, func(key string, head uint64, obj runtime.Object) {
			f.entered[key], f.enteredAt = head, max(f.enteredAt, head)
			f.h.OnAdd(obj, false)
		}); err != nil || ctx.Err() != nil {
			return err
		}
		if dels.given > 0 {
			r.inf.log.Info("gave a handler the deletes made while a range it took over was held by none",
				"resource", r.inf.f.res.String(), "deletes", dels.given)
		}
	}
	f.changed = ch
	if ready {
		if !next.Empty() {
			f.owesRecord = false // the first range is whole
		}
		f.acked.Store(gen)
		f.g.kick()
	}
	return nil
}

// entering calls fn, in key order, with each stored object that want
// accepts (by key and shard UID), decoded for the handler, and the head
// of the chunk it was read in (readChunk: a chunk per read transaction);
// before each chunk's, it calls before with the chunk's head, last key
// and whether it reaches the end of the index. It returns early, with
// nil, when ctx is done.
func (r *registration) entering(ctx context.Context, want func(key, uid string) bool, before func(head uint64, last string, end bool) error, fn func(key string, head uint64, obj runtime.Object)) error {
	after, first := "", true
	for ctx.Err() == nil {
		objs, head, end, err := r.readChunk(after, first)
		if err != nil {
			return err
		}
		end = end || len(objs) == 0
		last := ""
		if len(objs) > 0 {
			last = objs[len(objs)-1].key
		}
		if err := before(head, last, end); err != nil || ctx.Err() != nil {
			return err
		}
		for _, o := range objs {
			obj, err := r.inf.decode(o.obj)
			if err != nil {
				return err
			}
			if uid, ok := shardUID(obj); ok && want(o.key, string(uid)) {
				fn(o.key, head, obj)
			}
		}
		if end {
			return nil
		}
		after, first = last, false
	}
	return nil
}

// movedOut reports whether e is a key that left a ranged file because
// the file's range shrank (journal.Writer.Reshard): the object still
// exists, held by another replica.
func movedOut(e journal.Event) bool {
	return e.Type == journal.Deleted && e.Reason == journal.ReasonMoved
}
