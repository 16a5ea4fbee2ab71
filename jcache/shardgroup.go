package jcache

// shardGroup: a cache's membership in a shard group, and the range its
// handlers hold (shard.go has the states and why).
//
// The group's run goroutine owns the Lease and the observations; the
// range H and its generation are read by the handlers (shardFilter) under
// mu. Each change of H bumps gen and closes the changed channel; each
// handler applies the new H in its own goroutine and acknowledges gen
// (shardfilter.go). The range published on the Lease is H united with
// every range given since the oldest generation a live handler has not
// acknowledged, so a handler that still delivers a range keeps it
// published.

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/go-logr/logr"
	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	coordclient "k8s.io/client-go/kubernetes/typed/coordination/v1"
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
	o      ShardOptions
	log    logr.Logger
	leases coordclient.LeaseInterface
	lease  string // the Lease's name
	id     string // holderIdentity: member and instance
	mine   *coordinationv1.Lease
	seen   map[string]observed // by Lease name: the last renewal seen and when
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
	// previous is what this member's Lease showed when another instance
	// of it held it last (a restart), nil if none did.
	previous *publication
	wake     chan struct{} // a handler acknowledged a generation
	// abandon makes run return at ctx's end without deleting the Lease,
	// as a killed process would (a test hook: testhooks.go).
	abandon bool

	mu      sync.Mutex
	held    hashrange.Set
	gen     uint64
	given   []givenRange // the ranges of generations not yet acknowledged by all
	takes   []takeover   // the takeovers of those generations (shardtakeover.go)
	changed chan struct{}
	filters map[*shardFilter]struct{}
	// files are the ranged feeds' files (feedrange.go) and the range each
	// has synced at (nil: none yet, or its loop is stopped).
	files     map[*feed]hashrange.Set
	renewedAt time.Time
	st        ShardStatus
	pub       hashrange.Set
}

// givenRange is the range H was at generation gen.
type givenRange struct {
	gen uint64
	set hashrange.Set
}

// observed is a Lease's last renewal record and the local time it was
// first seen (shards/observe.go: a Lease is judged by this clock alone).
type observed struct {
	holder, renew string
	at            time.Time
}

func newShardGroup(cfg *rest.Config, o ShardOptions, log logr.Logger, abandon bool) (*shardGroup, error) {
	if cfg == nil {
		return nil, errors.New("jcache: no rest.Config")
	}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("jcache: shard group: %w", err)
	}
	var inst [4]byte
	_, _ = rand.Read(inst[:])
	return &shardGroup{
		o:        o,
		log:      log.WithValues("shardGroup", o.Group, "member", o.Member),
		leases:   cs.CoordinationV1().Leases(o.Namespace),
		lease:    o.Group + "-" + o.Member,
		id:       o.Member + "_" + hex.EncodeToString(inst[:]),
		seen:     map[string]observed{},
		dead:     map[string]*unheldRange{},
		trackers: map[*feed]*position.Tracker{},
		wake:     make(chan struct{}, 1),
		changed:  make(chan struct{}),
		filters:  map[*shardFilter]struct{}{},
		files:    map[*feed]hashrange.Set{},
		st:       ShardStatus{Member: o.Member},
		abandon:  abandon,
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
func (g *shardGroup) setHeld(next hashrange.Set, takes []takeover) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if next.Equal(g.held) {
		return
	}
	g.gen++
	g.held = next
	g.given = append(g.given, givenRange{gen: g.gen, set: next})
	for _, t := range takes {
		t.gen = g.gen
		g.takes = append(g.takes, t)
		g.log.Info("taking over part of a range another member held", "member", t.member,
			"share", fmt.Sprintf("%.1f%%", 100*t.part.Share()), "generation", g.gen)
	}
	close(g.changed)
	g.changed = make(chan struct{})
	g.log.Info("shard range changed", "share", fmt.Sprintf("%.1f%%", 100*next.Share()), "generation", g.gen)
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

// join registers f and returns the range it applies from now on, with
// its generation.
func (g *shardGroup) join(f *shardFilter) (hashrange.Set, <-chan struct{}) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.filters[f] = struct{}{}
	f.acked.Store(g.gen)
	return g.held, g.changed
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
	if err := g.renew(ctx, now, pub, positions); err != nil {
		g.mu.Lock()
		g.st.LastError = err
		expired := g.renewedAt.IsZero() || now.Sub(g.renewedAt) >= g.o.LeaseDuration
		g.mu.Unlock()
		if expired {
			g.setHeld(nil, nil) // lost: the others take the range
		}
		return
	}
	live, others, dead, shows, err := g.view(ctx, now)
	if err != nil {
		g.mu.Lock()
		g.st.LastError = err
		g.mu.Unlock()
		return
	}
	target := hashrange.Assign(live, 0)[g.o.Member]
	cur, _, _ := g.current()
	next := nextHeld(cur, target, others)
	g.setHeld(next, g.takeovers(dead, shows, others, cur, next))
	g.mu.Lock()
	g.st.Members, g.st.Target, g.st.LastError = live, target.Selector(), nil
	g.mu.Unlock()
	if !g.publishable().Equal(pub) {
		g.kick() // publish the grown range, or a shrink already applied
	}
}

// nextHeld returns the range the handlers move to from cur, given this
// member's share target and the ranges others publish (shard.go,
// "States"): what left the share goes at once; what entered comes only
// where no other live member publishes it.
func nextHeld(cur, target, others hashrange.Set) hashrange.Set {
	return cur.Intersect(target).Union(target.Minus(others))
}

// renew creates or renews the member's Lease with pub and positions on
// it.
func (g *shardGroup) renew(ctx context.Context, now time.Time, pub hashrange.Set, positions map[string]string) error {
	ctx, cancel := context.WithTimeout(ctx, g.requestTimeout())
	defer cancel()
	secs := int32(g.o.LeaseDuration / time.Second)
	mt := metav1.NewMicroTime(now)
	fill := func(l *coordinationv1.Lease) {
		metav1.SetMetaDataLabel(&l.ObjectMeta, shards.LabelGroup, g.o.Group)
		metav1.SetMetaDataAnnotation(&l.ObjectMeta, shards.AnnotationMember, g.o.Member)
		metav1.SetMetaDataAnnotation(&l.ObjectMeta, shards.AnnotationSelector, pub.Selector())
		metav1.SetMetaDataAnnotation(&l.ObjectMeta, annotationPositions, encodePositions(positions))
		if ptr.Deref(l.Spec.HolderIdentity, "") != g.id {
			l.Spec.AcquireTime = &mt
		}
		l.Spec.HolderIdentity = &g.id
		l.Spec.LeaseDurationSeconds = &secs
		l.Spec.RenewTime = &mt
	}
	var err error
	if g.mine != nil {
		l := g.mine.DeepCopy()
		fill(l)
		if l, err = g.leases.Update(ctx, l, metav1.UpdateOptions{}); err == nil {
			g.renewed(l, now, pub)
			return nil
		}
		if !apierrors.IsConflict(err) && !apierrors.IsNotFound(err) {
			return fmt.Errorf("jcache: renew Lease %s: %w", g.lease, err)
		}
		g.mine = nil
	}
	l, err := g.leases.Get(ctx, g.lease, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		l = &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: g.lease, Namespace: g.o.Namespace}}
		fill(l)
		if l, err = g.leases.Create(ctx, l, metav1.CreateOptions{}); err != nil {
			return fmt.Errorf("jcache: create Lease %s: %w", g.lease, err)
		}
	case err != nil:
		return fmt.Errorf("jcache: get Lease %s: %w", g.lease, err)
	default:
		if h := ptr.Deref(l.Spec.HolderIdentity, ""); h != "" && h != g.id && !g.expired(l, now) {
			return fmt.Errorf("%w: %s holds %s", shards.ErrLeaseHeld, h, g.lease)
		}
		g.notePrevious(l)
		fill(l)
		if l, err = g.leases.Update(ctx, l, metav1.UpdateOptions{}); err != nil {
			return fmt.Errorf("jcache: update Lease %s: %w", g.lease, err)
		}
	}
	g.renewed(l, now, pub)
	return nil
}

func (g *shardGroup) renewed(l *coordinationv1.Lease, now time.Time, pub hashrange.Set) {
	g.mine = l
	g.mu.Lock()
	g.renewedAt, g.pub = now, pub
	g.mu.Unlock()
}

// requestTimeout bounds one Lease request: RenewInterval, at least 2 s, at
// most half the LeaseDuration.
func (g *shardGroup) requestTimeout() time.Duration {
	return min(max(g.o.RenewInterval, 2*time.Second), g.o.LeaseDuration/2)
}

// expired records what l shows at the local time now and reports whether
// it has not been renewed within its duration as this replica saw it.
func (g *shardGroup) expired(l *coordinationv1.Lease, now time.Time) bool {
	if l.Spec.RenewTime == nil || l.Spec.LeaseDurationSeconds == nil {
		return true
	}
	rec := observed{holder: ptr.Deref(l.Spec.HolderIdentity, ""), renew: l.Spec.RenewTime.UTC().Format(time.RFC3339Nano)}
	ob, ok := g.seen[l.Name]
	if !ok || ob.holder != rec.holder || ob.renew != rec.renew {
		rec.at = now
		g.seen[l.Name] = rec
		ob = rec
	}
	return !now.Before(ob.at.Add(time.Duration(*l.Spec.LeaseDurationSeconds) * time.Second))
}

// view lists the group's Leases and returns the live members, sorted
// (this one included), the union of the ranges the other live members
// publish, and what the other members' expired and live Leases show, by
// member.
func (g *shardGroup) view(ctx context.Context, now time.Time) (live []string, others hashrange.Set, dead, shows map[string]publication, err error) {
	ctx, cancel := context.WithTimeout(ctx, g.requestTimeout())
	defer cancel()
	list, err := g.leases.List(ctx, metav1.ListOptions{LabelSelector: shards.LabelGroup + "=" + g.o.Group})
	if err != nil {
		return nil, nil, nil, nil, fmt.Errorf("jcache: list Leases: %w", err)
	}
	live = []string{g.o.Member}
	dead, shows = map[string]publication{}, map[string]publication{}
	names := map[string]bool{}
	for i := range list.Items {
		l := &list.Items[i]
		names[l.Name] = true
		name := l.Annotations[shards.AnnotationMember]
		if name == "" || name == g.o.Member || ptr.Deref(l.Spec.HolderIdentity, "") == "" {
			continue
		}
		sel := l.Annotations[shards.AnnotationSelector]
		s, perr := hashrange.Parse(sel)
		if sel == "" {
			s, perr = nil, nil
		}
		p := publication{set: s, positions: parsePositions(l.Annotations[annotationPositions])}
		if g.expired(l, now) {
			if perr == nil && !s.Empty() {
				dead[name] = p
			}
			continue
		}
		live = append(live, name)
		if perr == nil {
			others = others.Union(s)
			shows[name] = p
		}
	}
	for n := range g.seen {
		if !names[n] {
			delete(g.seen, n)
		}
	}
	slices.Sort(live)
	return slices.Compact(live), others, dead, shows, nil
}

// release deletes the member's Lease if this instance holds it.
func (g *shardGroup) release() {
	if g.mine == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	uid, rv := types.UID(g.mine.UID), g.mine.ResourceVersion
	err := g.leases.Delete(ctx, g.lease, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &uid, ResourceVersion: &rv}})
	if err != nil && !apierrors.IsNotFound(err) {
		g.log.Info("could not delete the shard Lease; it expires on its own", "error", err.Error())
	}
	g.mine = nil
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
