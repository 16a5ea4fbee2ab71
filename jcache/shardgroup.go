package jcache

// shardGroup: a cache's membership in a shard group, and the range its
// handlers hold (shard.go has the states and why).
//
// The group's run goroutine owns the membership (shards.Membership: the
// Lease and the observations of the others'); the
// range H and its generation are read by the handlers (shardFilter) under
// mu. Each change of H bumps gen and closes the changed channel; each
// handler applies the new H in its own goroutine and acknowledges gen
// (shardfilter.go). The range published on the Lease is H united with
// every range given since the oldest generation a live handler has not
// acknowledged, so a handler that still delivers a range keeps it
// published.

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/go-logr/logr"
	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"

	"github.com/watchjournal/watchjournal/internal/hashrange"
	"github.com/watchjournal/watchjournal/jcache/internal/position"
	"github.com/watchjournal/watchjournal/shards"
)

// ShardStatus is a sharded cache's view of its group (Cache.ShardStatus).
type ShardStatus struct {
	// Member is this replica's name; Members the live members last seen,
	// sorted, this one included (empty before the first renewal).
	Member  string
	Members []string
	// Held is the range the handlers are given, Target this member's share
	// of the live set, Published the range on its Lease: KEP-5866
	// shardSelectors of object.metadata.uid ("" for none).
	Held, Target, Published string
	// Settled is true when Held is Target, every handler applies it, and
	// Published is Held: no move of this member is under way.
	Settled bool
	// LastError is the last failed Lease request, nil after a success.
	LastError error
}

// shardGroup is one cache's membership.
type shardGroup struct {
	o   ShardOptions
	log logr.Logger
	ms  *shards.Membership
	// dead are the members whose Leases expired, as this member follows
	// them; released the ranges live members let go, lastLive what their
	// Leases showed at the last view; trackers the positions of the whole
	// files this member publishes (shardtakeover.go).
	dead     map[string]*unheldRange
	released []*unheldRange
	lastLive map[string]publication
	trackers map[*feed]*position.Tracker
	// published are the positions last published (shardtakeover.go,
	// "Frozen").
	published map[string]string
	// unreadable maps each member whose Lease's selector did not parse at
	// the last view to that selector (publications).
	unreadable map[string]string
	// previousNoted is true once this member's Lease as another instance
	// of it left it (a restart) was read into released (notePrevious).
	previousNoted bool
	wake          chan struct{} // a handler acknowledged a generation
	// abandon makes run return at ctx's end without deleting the Lease,
	// as a killed process would; gate, when set, holds the first renewal
	// until it is closed (test hooks: testhooks.go).
	abandon bool
	gate    <-chan struct{}

	mu      sync.Mutex
	held    hashrange.Set
	gen     uint64
	given   []givenRange // the ranges of generations not yet acknowledged by all
	takes   []takeover   // the takeovers of those generations (shardtakeover.go)
	changed chan struct{}
	filters map[*shardFilter]struct{}
	// files are the ranged feeds' files (feedrange.go) and the range each
	// has synced at (nil: none yet, or its loop is stopped).
	files map[*feed]hashrange.Set
	st    ShardStatus
	pub   hashrange.Set
}

// givenRange is the range H was at generation gen.
type givenRange struct {
	gen uint64
	set hashrange.Set
}

func newShardGroup(cfg *rest.Config, o ShardOptions, log logr.Logger, hooks testHooks) (*shardGroup, error) {
	if cfg == nil {
		return nil, errors.New("jcache: no rest.Config")
	}
	ms, err := shards.NewMembership(cfg, shards.MembershipOptions{Group: o.Group, Member: o.Member, Namespace: o.Namespace,
		LeaseDuration: o.LeaseDuration, RenewInterval: o.RenewInterval})
	if err != nil {
		return nil, fmt.Errorf("jcache: shard group: %w", err)
	}
	return &shardGroup{
		o:        o,
		log:      log.WithValues("shardGroup", o.Group, "member", o.Member),
		ms:       ms,
		dead:     map[string]*unheldRange{},
		trackers: map[*feed]*position.Tracker{},
		wake:     make(chan struct{}, 1),
		changed:  make(chan struct{}),
		filters:  map[*shardFilter]struct{}{},
		files:    map[*feed]hashrange.Set{},
		st:       ShardStatus{Member: o.Member},
		abandon:  hooks.abandonShardLease,
		gate:     hooks.shardGate,
	}, nil
}

// current returns H, its generation and the channel closed at its next
// change.
func (g *shardGroup) current() (hashrange.Set, uint64, <-chan struct{}) {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.held, g.gen, g.changed
}

// setHeld makes next the range H, a new generation, when it differs;
// takes are the parts of ranges other members held that it grows into.
// The positions published until the handlers apply it are lowered to the
// takes' (shardtakeover.go, "Frozen"): the range published with them
// includes the parts taken over, whose deletes after the takes' positions
// the handlers have not been given yet. The takeovers kept lose what left
// H (no longer this member's to give), so they stay within H.
func (g *shardGroup) setHeld(next hashrange.Set, takes []takeover) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if next.Equal(g.held) {
		return
	}
	g.gen++
	g.held = next
	g.given = append(g.given, givenRange{gen: g.gen, set: next})
	g.takes = slices.DeleteFunc(g.takes, func(t takeover) bool { return t.part.Intersect(next).Empty() })
	for i := range g.takes {
		g.takes[i].part = g.takes[i].part.Intersect(next)
	}
	for _, t := range takes {
		g.published = lowered(g.published, t.positions)
		t.gen = g.gen
		g.takes = append(g.takes, t)
		g.log.Info("taking over part of a range another member held", "member", t.member,
			"share", fmt.Sprintf("%.1f%%", 100*t.part.Share()), "generation", g.gen)
	}
	close(g.changed)
	g.changed = make(chan struct{})
	g.log.Info("shard range changed", "share", fmt.Sprintf("%.1f%%", 100*next.Share()), "generation", g.gen)
}

// lowered returns ps with each position that is later than the one of
// the same resource in floor replaced by floor's; ps is not modified.
// A resource ps has no position for stays without one.
func lowered(ps, floor map[string]string) map[string]string {
	out := maps.Clone(ps)
	for k, have := range ps {
		if p, ok := floor[k]; ok && position.Later(have, p) {
			out[k] = p
		}
	}
	return out
}

// fileSynced records that the ranged feed f's file holds the range set,
// listed and synced (nil: it holds no range it keeps current, or f
// closed when gone), and wakes the filters: a range they wait to grow
// into may be held now (shardFilter.apply).
func (g *shardGroup) fileSynced(f *feed, set hashrange.Set, gone bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if gone {
		delete(g.files, f)
	} else {
		g.files[f] = set
	}
	close(g.changed)
	g.changed = make(chan struct{})
}

// filesHold reports whether every ranged feed's file has synced at a
// range covering s.
func (g *shardGroup) filesHold(s hashrange.Set) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	for _, set := range g.files {
		if !set.Covers(s) {
			return false
		}
	}
	return true
}

// join registers f and returns the range it applies from now on and the
// channel closed at the group's next change.
//
// The range is H less what a ranged file has not listed yet (filesHold):
// where that leaves part of H out, f acknowledges the generation before
// H's, so its apply finishes the growth once the files hold it
// (shardfilter.go) and the group publishes what it may still deliver.
// Under the same lock f collects the takeovers of the generations up to
// H's (shardtakeover.go): a publication that forgets the takeovers every
// filter acknowledged cannot run between f's acknowledgement and its
// collection.
func (g *shardGroup) join(f *shardFilter) (hashrange.Set, <-chan struct{}) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.filters[f] = struct{}{}
	set, acked := g.held, g.gen
	for _, s := range g.files {
		set = set.Intersect(s)
	}
	if !set.Equal(g.held) {
		acked = g.gen - 1 // H is not empty, so gen is at least 1
	}
	f.partial = set.Empty() || acked != g.gen
	f.acked.Store(acked)
	f.pending, f.taken = append(f.pending, g.takeoversLocked(f.taken, g.gen)...), g.gen
	return set, g.changed
}

// remove forgets f (its handler stopped).
func (g *shardGroup) remove(f *shardFilter) {
	g.mu.Lock()
	delete(g.filters, f)
	g.mu.Unlock()
	g.kick()
}

func (g *shardGroup) kick() {
	select {
	case g.wake <- struct{}{}:
	default:
	}
}

// publishable returns the union of the ranges of the generations from
// the oldest one a handler still applies to the current one, and forgets
// the older generations.
func (g *shardGroup) publishable() hashrange.Set {
	g.mu.Lock()
	defer g.mu.Unlock()
	oldest := g.gen
	for f := range g.filters {
		oldest = min(oldest, f.acked.Load())
	}
	g.given = slices.DeleteFunc(g.given, func(r givenRange) bool { return r.gen < oldest })
	if len(g.filters) > 0 { // else kept for the first handlers' replay (shardtakeover.go)
		g.takes = slices.DeleteFunc(g.takes, func(t takeover) bool { return t.gen <= oldest })
	}
	var out hashrange.Set
	for _, r := range g.given {
		out = out.Union(r.set)
	}
	return out
}

// status returns the group's status.
func (g *shardGroup) status() ShardStatus {
	g.mu.Lock()
	defer g.mu.Unlock()
	st := g.st
	st.Members = slices.Clone(st.Members)
	st.Held = g.held.Selector()
	st.Published = g.pub.Selector()
	settled := true
	for f := range g.filters {
		settled = settled && f.acked.Load() == g.gen
	}
	st.Settled = settled && st.Held == st.Target && g.pub.Equal(g.held) && len(st.Members) > 0
	return st
}

// run follows the group until ctx is done, then deletes the Lease so that
// the others take the range at their next renewal. It returns when the
// Lease is deleted (or could not be, after a bounded try).
func (g *shardGroup) run(ctx context.Context) {
	if g.gate != nil {
		select {
		case <-g.gate:
		case <-ctx.Done():
		}
	}
	t := time.NewTimer(0)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			if g.abandon {
				return
			}
			g.setHeld(nil, nil)
			g.release()
			return
		case <-t.C:
			t.Reset(g.o.RenewInterval)
		case <-g.wake:
		}
		g.tick(ctx)
	}
}

// tick renews the Lease with the range published, reads the live set and
// moves H toward this member's share (shard.go, "States").
func (g *shardGroup) tick(ctx context.Context) {
	now := time.Now()
	positions := g.positions()
	pub := g.publishable()
	a := shards.Announcement{Selector: pub.Selector(), Annotations: map[string]string{annotationPositions: encodePositions(positions)}}
	if _, err := g.ms.Renew(ctx, now, a); err != nil {
		g.mu.Lock()
		g.st.LastError = err
		g.mu.Unlock()
		if g.ms.Lapsed(now) {
			g.lapse()
		}
		return
	}
	if prev := g.ms.Previous(); prev != nil {
		g.notePrevious(prev)
	}
	g.mu.Lock()
	g.pub = pub
	g.mu.Unlock()
	v, err := g.ms.View(ctx, now)
	if err != nil {
		g.mu.Lock()
		g.st.LastError = err
		g.mu.Unlock()
		return
	}
	live := v.Live
	others, dead, shows := g.publications(v)
	target := hashrange.Assign(live, 0)[g.o.Member]
	cur, _, _ := g.current()
	next := nextHeld(cur, target, others)
	g.setHeld(next, g.takeovers(dead, shows, others, cur, next))
	g.collect(ctx, v, pub)
	g.mu.Lock()
	g.st.Members, g.st.Target, g.st.LastError = live, target.Selector(), nil
	g.mu.Unlock()
	if !g.publishable().Equal(pub) {
		g.kick() // publish the grown range, or a shrink already applied
	}
}

// lapse drops H: no renewal was answered for a LeaseDuration, so the
// others may take the range. The range is let go as a live member's
// would be, at the positions last published (shardtakeover.go, "A
// restart"): the handlers stop delivering it now, and if this member
// grows back into a part of it before another member publishes that
// part, its handlers get the deletes made in between.
func (g *shardGroup) lapse() {
	if cur, _, _ := g.current(); !cur.Empty() {
		g.released = append(g.released, &unheldRange{member: g.o.Member, positions: g.published, orphan: cur})
	}
	g.setHeld(nil, nil)
}

// nextHeld returns the range the handlers move to from cur, given this
// member's share target and the ranges others publish (shard.go,
// "States"): what left the share goes at once; what entered comes only
// where no other live member publishes it.
func nextHeld(cur, target, others hashrange.Set) hashrange.Set {
	return cur.Intersect(target).Union(target.Minus(others))
}

// publications returns what the other members' Leases in v show: the
// union of the ranges the live ones publish, and by member what each
// expired Lease that still names a holder and a range shows (dead) and
// what each live one shows (shows), positions included
// (shardtakeover.go). A live member whose selector does not parse counts
// as publishing the whole space (this member grows into nothing it may
// still deliver) and as showing what it showed at the last view (no range
// is judged let go from a Lease that cannot be read); a dead one whose
// selector does not parse is no takeover. Both are logged, once per
// member and selector. Run's goroutine only.
func (g *shardGroup) publications(v shards.View) (others hashrange.Set, dead, shows map[string]publication) {
	dead, shows = map[string]publication{}, map[string]publication{}
	unreadable := map[string]string{}
	defer func() { g.unreadable = unreadable }()
	parse := func(l *coordinationv1.Lease) (publication, error) {
		sel := l.Annotations[shards.AnnotationSelector]
		if sel == "" {
			return publication{positions: parsePositions(l.Annotations[annotationPositions])}, nil
		}
		s, err := hashrange.Parse(sel)
		return publication{set: s, positions: parsePositions(l.Annotations[annotationPositions])}, err
	}
	for _, l := range v.Gone {
		if ptr.Deref(l.Spec.HolderIdentity, "") == "" {
			continue
		}
		p, err := parse(l)
		if err != nil {
			name, sel := l.Annotations[shards.AnnotationMember], l.Annotations[shards.AnnotationSelector]
			unreadable[name] = sel
			if g.unreadable[name] != sel {
				g.log.Error(err, "the shard selector of a dead member's Lease does not parse: its range is not taken over, the deletes made while it is held by none are not given",
					"dead", name, "selector", sel)
			}
			continue
		}
		if !p.set.Empty() {
			dead[l.Annotations[shards.AnnotationMember]] = p
		}
	}
	for name, l := range v.Leases {
		p, err := parse(l)
		if err != nil {
			sel := l.Annotations[shards.AnnotationSelector]
			unreadable[name] = sel
			if g.unreadable[name] != sel {
				g.log.Error(err, "the shard selector of a live member's Lease does not parse: counted as the whole space, this member grows into none of it",
					"peer", name, "selector", sel)
			}
			others = hashrange.Full()
			if was, ok := g.lastLive[name]; ok {
				shows[name] = was
			}
			continue
		}
		others = others.Union(p.set)
		shows[name] = p
	}
	return others, dead, shows
}

// release deletes the member's Lease if this instance holds it.
func (g *shardGroup) release() {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := g.ms.Release(ctx); err != nil && !errors.Is(err, shards.ErrLeaseHeld) {
		g.log.Info("could not delete the shard Lease; it expires on its own", "error", err.Error())
	}
}

// ShardStatus returns the cache's view of its shard group; the zero
// ShardStatus when the cache is not sharded (Options.Shard nil).
func (c *Cache) ShardStatus() ShardStatus {
	if c.shard == nil {
		return ShardStatus{}
	}
	return c.shard.status()
}

// Holds reports whether obj is in this replica's range: its controller
// owner's UID, else its own, hashes into the range the handlers are given
// now. A reconciler of a sharded resource can ask it before acting on an
// object whose request was queued before its key moved away (shard.go,
// "Limits"). It does not look at obj's resource: ask it of objects of
// ShardOptions.Resources. True when the cache is not sharded; false for an
// object without a UID in a sharded cache.
func (c *Cache) Holds(obj metav1.Object) bool {
	if c.shard == nil {
		return true
	}
	uid, _ := shardUID(obj)
	held, _, _ := c.shard.current()
	return uid != "" && held.ContainsUID(string(uid))
}
