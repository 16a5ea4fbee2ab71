package jcache

// Takeover deletes: a range another member held is taken over with the
// deletes made since that member last published where its handlers were
// given to the taker's handlers: the range of a dead or stopped member,
// and the range a live member let go (a move's gap).
//
// Invariant. When this member's handlers grow into part of a range
// another member published and no longer does (its Lease expired or was
// deleted, or it let the part go), and no other live member has
// published that part since, each handler of a sharded resource whose
// file journals the whole resource gets, before the OnAdds of that part,
// OnDelete(DeletedFinalStateUnknown) for every key of the part deleted
// in this replica's file after the position that member published with
// the part (catchup.go's rules: one per UID deleted, except a UID the key
// holds again; so a name recreated with a new UID is DELETE, then ADD).
// At least once: a delete the other member's handlers were given after
// that publication is given again. A key that only moved is no delete:
// only the file's DELETEDs are given.
//
// Why the position. Offsets do not cross replicas, resourceVersions do
// (package position). Each member publishes on its Lease, per whole file
// of a sharded resource, the position its handlers were given: the
// resourceVersion covered by the offset the file's retention hold last
// committed (retention.go: every handler of the file had delivered it),
// in annotationPositions, a JSON object from position.Resource to
// resourceVersion. The taker places the position in its own file
// (position.StartFor: conservatively, never after an event the position
// does not cover) and reads the deletes after it, as a restart's
// catch-up reads them after the file's record. For a range a live member
// let go, the position is the one its Lease showed at this member's
// previous view, while it still published the range: its handlers
// delivered every event up to their head before they let the range go,
// so that position is covered.
//
// Frozen. A handler that applies a shrink stops delivering the range
// that left while its file's hold, and so the position, moves on with
// the rest; a handler that applies a growth gives the range's deletes
// and state only then. So while any filter has not applied the group's
// last change, a member publishes the positions it published before the
// change, lowered to the positions of the parts the change takes over
// (shardGroup.setHeld): each position it publishes with a range is one
// its handlers had been given of that range, the parts taken over
// included.
//
// Which part. A member keeps, per dead Lease it sees and per range a live
// member let go between two of its views (all it published, when its
// Lease is gone: a clean stop deletes it), the part no live member has
// published since (unheldRange.orphan): it starts as that range minus
// what this member held then, and loses whatever a live member publishes
// and whatever this member's handlers are given. So a part is taken over
// once, by the member whose growth takes it first.
//
// Handlers that start after the growth. The group keeps the takeovers
// until every filter has applied their generation, and while no filter
// has joined; a filter collects those it finds when it joins, and its
// replay gives their deletes before each chunk's OnAdds (handler.go), so
// the first handlers of a replica that grew before they started get
// them too.
//
// A restart. A member's own Lease, last renewed by an earlier instance
// of it (another holderIdentity), is a range let go by the instance that
// stopped, at the positions that instance published: its part no live
// member has published since is taken over by this member's growth, once,
// so a restarted replica's handlers get the deletes made while it was
// down. A lapse is the same: a member whose renewals went unanswered for
// a LeaseDuration drops its range and lets it go at the positions it
// published last (shardGroup.lapse), so regaining it gives the deletes
// made in between. A handler whose replay caught up from the file's
// record (catchup.go) while its filter applied less than H (no range
// given yet, or a growth deferred) got from it only the deletes of what
// it applied; the growth that completes its first range gives, for the
// part no takeover gives, the deletes since the record too: so a replica
// stopped cleanly (its Lease deleted, no Lease of an earlier instance to
// take over) and restarted while no other member took its range gives
// them, as an unsharded cache does.
//
// What is not given (docs/sharding.md, "Deletes while a range is held by
// none"): the deletes of a resource in ShardOptions.Owners (the taker's
// file did not journal the range; the other member's file is in another
// process); the deletes where the member published no position for the
// resource, or where this member saw no Lease of it that still published
// the range (it let the range go before this member's first view); the
// deletes retention trimmed from the taker's file before the takeover
// (logged, as catch-up logs them); the takeovers of a generation every
// filter had applied, for a handler added later.

import (
	"encoding/json"
	"maps"
	"slices"

	coordinationv1 "k8s.io/api/coordination/v1"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"

	"github.com/watchjournal/watchjournal/internal/hashrange"
	"github.com/watchjournal/watchjournal/jcache/internal/position"
	"github.com/watchjournal/watchjournal/shards"
)

// annotationPositions is the Lease annotation with the positions a member
// published: a JSON object from position.Resource to resourceVersion.
const annotationPositions = "watchjournal.io/shard-positions"

// publication is the range and positions a member's Lease shows.
type publication struct {
	set       hashrange.Set
	positions map[string]string
}

// unheldRange is a dead member as this member follows it, or a range a
// live member let go: the positions of its Lease (as they were while it
// still published the range) and the part of the range no live member
// has published since (this file's comment, "Which part").
type unheldRange struct {
	member    string
	positions map[string]string
	orphan    hashrange.Set
}

// takeover is the part of another member's range (dead, or let go) that
// the handlers grow into at generation gen, with the positions that
// member published with it.
type takeover struct {
	gen       uint64
	member    string
	part      hashrange.Set
	positions map[string]string
}

// parsePositions returns the positions of a Lease's annotation; nil when
// it has none or they do not parse.
func parsePositions(s string) map[string]string {
	if s == "" {
		return nil
	}
	var out map[string]string
	if json.Unmarshal([]byte(s), &out) != nil {
		return nil
	}
	return out
}

// notePrevious records l, this member's Lease as another instance of it
// left it, as a range let go that the restart takes over (this file's
// comment, "A restart"), unless it published no range; once per
// instance: what this member holds of it from then on is its own.
func (g *shardGroup) notePrevious(l *coordinationv1.Lease) {
	if g.previousNoted || ptr.Deref(l.Spec.HolderIdentity, "") == "" {
		return
	}
	g.previousNoted = true
	sel := l.Annotations[shards.AnnotationSelector]
	if sel == "" {
		return
	}
	s, err := hashrange.Parse(sel)
	if err != nil {
		g.log.Error(err, "the shard selector this member's previous instance published does not parse: the deletes made while it was down are not given",
			"selector", sel)
		return
	}
	cur, _, _ := g.current()
	if orphan := s.Minus(cur); !orphan.Empty() {
		g.released = append(g.released, &unheldRange{member: g.o.Member, positions: parsePositions(l.Annotations[annotationPositions]), orphan: orphan})
	}
}

// takeovers updates the dead members from the expired Leases of this
// view (dead) and the ranges live members let go since the last one
// (live: what their Leases show now), and returns the parts of those
// ranges that the move from cur to next grows into, others being the
// ranges the live members publish. Run's goroutine only.
func (g *shardGroup) takeovers(dead, live map[string]publication, others, cur, next hashrange.Set) []takeover {
	for name, was := range g.lastLive {
		p := live[name] // zero when its Lease is gone
		if _, isDead := dead[name]; isDead {
			continue // its Lease shows its range: below
		}
		// A member still live lets go what it no longer publishes; one
		// whose Lease is gone (a clean stop) all it published.
		if gone := was.set.Minus(p.set).Minus(cur); !gone.Empty() {
			g.released = append(g.released, &unheldRange{member: name, positions: was.positions, orphan: gone})
		}
	}
	g.lastLive = live
	for name := range g.dead {
		if _, ok := dead[name]; !ok {
			delete(g.dead, name) // live again, or its Lease is gone
		}
	}
	grow := next.Minus(cur)
	var out []takeover
	for name, l := range dead {
		d, ok := g.dead[name]
		if !ok {
			d = &unheldRange{member: name, positions: l.positions, orphan: l.set.Minus(cur)}
			g.dead[name] = d
		}
		out = d.take(out, others, grow, next)
	}
	for _, d := range g.released {
		out = d.take(out, others, grow, next)
	}
	g.released = slices.DeleteFunc(g.released, func(d *unheldRange) bool { return d.orphan.Empty() })
	return out
}

// take appends to out the part of d's orphan range that grow takes,
// after it lost what others publish, and leaves next out of it.
func (d *unheldRange) take(out []takeover, others, grow, next hashrange.Set) []takeover {
	d.orphan = d.orphan.Minus(others)
	if part := d.orphan.Intersect(grow); !part.Empty() {
		out = append(out, takeover{member: d.member, part: part, positions: d.positions})
	}
	d.orphan = d.orphan.Minus(next)
	return out
}

// positions returns the positions this member publishes: per whole file
// of a sharded resource a filter delivers from, the position its
// retention hold last committed covers (the lowest, where two files
// share a position.Resource). While a filter has not applied the range's
// last change, the positions stay those published before it (this
// file's comment, "Frozen"). Run's goroutine only.
func (g *shardGroup) positions() (out map[string]string) {
	g.mu.Lock()
	feeds := map[*feed]bool{}
	settled := true
	for f := range g.filters {
		if f.feed != nil && f.feed.group == nil {
			feeds[f.feed] = true
		}
		settled = settled && f.acked.Load() == g.gen
	}
	g.mu.Unlock()
	if !settled && g.published != nil {
		return g.published
	}
	defer func() { g.published = out }()
	for fd := range g.trackers {
		if !feeds[fd] {
			delete(g.trackers, fd)
		}
	}
	out = map[string]string{}
	for fd := range feeds {
		t := g.trackers[fd]
		if t == nil {
			t = &position.Tracker{}
			g.trackers[fd] = t
		}
		fd.hmu.Lock()
		p := fd.committed
		fd.hmu.Unlock()
		t.Note(fd.j, p)
		pos := t.Position()
		if pos == "" {
			continue
		}
		k := position.Resource(fd.res)
		if have, ok := out[k]; !ok || position.Later(have, pos) {
			out[k] = pos
		}
	}
	return out
}

// encodePositions returns the annotation value of ps.
func encodePositions(ps map[string]string) string {
	if len(ps) == 0 {
		return "{}"
	}
	b, _ := json.Marshal(ps) // a map of strings always encodes
	return string(b)
}

// takeoversIn returns the takeovers of the generations in (after, upTo].
func (g *shardGroup) takeoversIn(after, upTo uint64) []takeover {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.takeoversLocked(after, upTo)
}

// takeoversLocked is takeoversIn with g.mu held.
func (g *shardGroup) takeoversLocked(after, upTo uint64) []takeover {
	var out []takeover
	for _, t := range g.takes {
		if t.gen > after && t.gen <= upTo {
			t.positions = maps.Clone(t.positions)
			out = append(out, t)
		}
	}
	return out
}

// collect adds to the filter's pending takeovers those of the group's
// generations up to gen it has not collected.
func (f *shardFilter) collect(gen uint64) {
	if gen > f.taken {
		f.pending = append(f.pending, f.g.takeoversIn(f.taken, gen)...)
		f.taken = gen
	}
}

// takeoverCatchUp returns the catch-up that gives the deletes owed to the
// part of the pending takeovers in entering, and, while the filter owes
// the file's record (this file's comment, "A restart"), to the rest of
// entering, with that part; nil when none is owed. It starts at the
// lowest of their starts. held is the group's range H: a part that left
// it is no longer this member's to give. The parts outside entering stay
// pending (a growth the filter defers: shardfilter.go).
func (f *shardFilter) takeoverCatchUp(r *registration, entering, held hashrange.Set) (*catchUp, hashrange.Set, error) {
	var (
		part, taken hashrange.Set
		start       uint64
		keep        []takeover
	)
	res := r.inf.f.res
	for _, t := range f.pending {
		t.part = t.part.Intersect(held)
		now := t.part.Intersect(entering)
		taken = taken.Union(now)
		if t.part = t.part.Minus(entering); !t.part.Empty() {
			keep = append(keep, t)
		}
		if now.Empty() || r.inf.f.group != nil {
			continue // nothing to give now, or a ranged file: it never journaled the part
		}
		pos, ok := t.positions[position.Resource(res)]
		if !ok {
			r.inf.log.Info("a shard member whose range this one takes over published no position for the resource: the deletes made while the range was held by none are not given",
				"resource", res.String(), "member", t.member)
			continue
		}
		at, why, ok, err := position.StartFor(r.inf.f.j, pos, 0)
		if err != nil {
			return nil, nil, err
		}
		switch {
		case !ok:
			r.inf.log.Error(nil, "the position of a shard member whose range this one takes over is not in the file: the deletes made while the range was held by none are given from the first retained event",
				"resource", res.String(), "member", t.member, "position", pos, "why", why)
			at = 1
		case !position.Comparable(pos):
			r.inf.log.Info("the position of a shard member whose range this one takes over is not a resourceVersion that compares: placed by equality, else at the whole journal",
				"resource", res.String(), "member", t.member, "position", pos, "offset", at, "why", why)
		}
		if part.Empty() || at < start {
			start = at
		}
		part = part.Union(now)
	}
	f.pending = keep
	if rest := entering.Minus(taken); f.owesRecord && !rest.Empty() {
		// What no takeover gives: the deletes since the file's record
		// (this file's comment, "A restart").
		if part.Empty() || f.record+1 < start {
			start = f.record + 1
		}
		part = part.Union(rest)
	}
	if part.Empty() {
		return nil, nil, nil
	}
	return newCatchUp(r.inf, start-1), part, nil
}

// takeoverDeletes passes to the filter's handler the deletes of the
// objects whose shard UID is in part, and records their keys as given as
// of head (shardFilter.entered: the follow skips their events up to it)
// and in keys: a name that holds an object of the range again (a new UID
// that hashes into the range held before) is given it again after the
// delete, so the handler's last call of the name is its state.
type takeoverDeletes struct {
	f     *shardFilter
	part  hashrange.Set
	head  uint64
	keys  map[string]bool
	given int
}

func (d *takeoverDeletes) OnAdd(any, bool)   {}
func (d *takeoverDeletes) OnUpdate(_, _ any) {}
func (d *takeoverDeletes) OnDelete(obj any) {
	uid, ok := shardUID(obj)
	if !ok || !d.part.ContainsUID(string(uid)) {
		return
	}
	if t, ok := obj.(toolscache.DeletedFinalStateUnknown); ok {
		if d.f.entered == nil {
			d.f.entered = map[string]uint64{}
		}
		d.f.entered[t.Key] = max(d.f.entered[t.Key], d.head)
		d.f.enteredAt = max(d.f.enteredAt, d.head)
		d.keys[t.Key] = true
	}
	d.given++
	d.f.h.OnDelete(obj)
}

// replayTakeovers returns the catch-up of the takeovers the registration's
// filter collected when it started, for the range it replays, and the
// handler that gives them; nil when none is owed. The part of H the
// filter has not applied yet (a growth deferred: shardgroup.go's join)
// stays pending for its apply.
func (r *registration) replayTakeovers() (*catchUp, *takeoverDeletes, error) {
	if r.sf == nil {
		return nil, nil, nil
	}
	set := r.sf.set.Load()
	if set == nil || set.Empty() {
		return nil, nil, nil
	}
	held, _, _ := r.sf.g.current()
	cu, part, err := r.sf.takeoverCatchUp(r, *set, held.Union(*set))
	if err != nil || cu == nil {
		return nil, nil, err
	}
	return cu, &takeoverDeletes{f: r.sf, part: part, keys: map[string]bool{}}, nil
}
