package jcache

import (
	"context"
	"fmt"
	"testing"
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

// A dead member's range is taken over once, by the growth that takes it
// first; what a live member publishes is no takeover, and neither is a
// range this member grows into again after it moved between live members.
func TestShardGroup_TakeoversOfADeadRange(t *testing.T) {
	r := func(first, last uint64) hashrange.Set { return hashrange.Set{{First: first, Last: last}} }
	deadB := map[string]publication{"b": {set: r(0, 99), positions: map[string]string{"cm": "7"}}}
	g := &shardGroup{dead: map[string]*unheldRange{}}
	for _, step := range []struct {
		name              string
		dead              map[string]publication
		others, cur, next hashrange.Set
		want              string
	}{
		{"b is dead: this member grows into half of its range", deadB, nil, nil, r(0, 49), "b[0-49]@map[cm:7] "},
		{"c publishes the other half: no takeover for it", deadB, r(50, 99), r(0, 49), r(0, 49), ""},
		{"c's half moves here, between live members: no takeover", deadB, nil, r(0, 49), r(0, 99), ""},
		{"the half taken over leaves", deadB, nil, r(0, 99), r(50, 99), ""},
		{"and comes back: no takeover", deadB, nil, r(50, 99), r(0, 99), ""},
		{"b comes back: it is no longer dead", nil, r(0, 99), r(0, 99), nil, ""},
		{"b dies again: its range is taken over again", deadB, nil, nil, r(0, 99), "b[0-99]@map[cm:7] "},
	} {
		if got := describeTakeovers(g.takeovers(step.dead, nil, step.others, step.cur, step.next)); got != step.want {
			t.Errorf("%s: takeovers(others %v, cur %v, next %v) = %q; want %q", step.name, step.others, step.cur, step.next, got, step.want)
		}
	}
}

// describeTakeovers prints each part of ts as member[first-last]@positions,
// each followed by a space.
func describeTakeovers(ts []takeover) string {
	out := ""
	for _, t := range ts {
		for _, p := range t.part {
			out += fmt.Sprintf("%s[%d-%d]@%v ", t.member, p.First, p.Last, t.positions)
		}
	}
	return out
}

// liveStep is a step of a takeovers table over live members: what they
// publish, the others' range, this member's current and next range, and
// the takeovers wanted, described.
type liveStep struct {
	name              string
	live              map[string]publication
	others, cur, next hashrange.Set
	want              string
}

// checkLiveSteps runs steps in order on g, no member dead, and fails each
// whose takeovers are not the ones wanted.
func checkLiveSteps(t *testing.T, g *shardGroup, steps []liveStep) {
	t.Helper()
	for _, step := range steps {
		if got := describeTakeovers(g.takeovers(map[string]publication{}, step.live, step.others, step.cur, step.next)); got != step.want {
			t.Errorf("%s: takeovers(live %v, others %v, cur %v, next %v) = %q; want %q", step.name, step.live, step.others, step.cur, step.next, got, step.want)
		}
	}
}

// A range a live member lets go is taken over with the positions it
// published while it still held the range: a delete made between its
// handlers' drop and this member's growth is owed.
func TestShardGroup_TakeoversOfALiveRelease(t *testing.T) {
	r := func(first, last uint64) hashrange.Set { return hashrange.Set{{First: first, Last: last}} }
	g := &shardGroup{dead: map[string]*unheldRange{}}
	checkLiveSteps(t, g, []liveStep{
		{"c holds everything", map[string]publication{"c": {set: r(0, 99), positions: map[string]string{"cm": "5"}}}, r(0, 99), nil, nil, ""},
		{"c lets half go, this member grows into it", map[string]publication{"c": {set: r(50, 99), positions: map[string]string{"cm": "9"}}}, r(50, 99), nil, r(0, 49), "c[0-49]@map[cm:5] "},
		{"nothing more moves", map[string]publication{"c": {set: r(50, 99), positions: map[string]string{"cm": "12"}}}, r(50, 99), r(0, 49), r(0, 49), ""},
		{"c lets the rest go to another member", map[string]publication{"c": {set: nil}, "d": {set: nil}}, nil, r(0, 49), r(0, 49), ""},
		{"which publishes it", map[string]publication{"c": {set: nil}, "d": {set: r(50, 99)}}, r(50, 99), r(0, 49), r(0, 49), ""},
		{"then lets it go here", map[string]publication{"c": {set: nil}, "d": {set: nil, positions: map[string]string{"cm": "20"}}}, nil, r(0, 49), r(0, 99), "d[50-99]@map[] "},
	})
}

// While a handler has not applied the range's last change, the positions
// published stay those of before it; once it has, they move again.
func TestShardGroup_PositionsFrozenWhileAChangeIsApplied(t *testing.T) {
	g := &shardGroup{changed: make(chan struct{}), filters: map[*shardFilter]struct{}{}, trackers: map[*feed]*position.Tracker{}}
	before := map[string]string{"cm": "5"}
	g.published = before
	f := newShardFilter(g, nil, nil)
	g.join(f)
	g.setHeld(hashrange.Set{{First: 0, Last: 99}}, nil)
	if got := g.positions(); fmt.Sprint(got) != fmt.Sprint(before) {
		t.Fatalf("positions() while a handler applies a change = %v; want %v (those of before it)", got, before)
	}
	f.acked.Store(1)
	if got := g.positions(); len(got) != 0 {
		t.Fatalf("positions() once applied = %v; want the current ones (none: no file)", got)
	}
}

// A member stopped cleanly deletes its Lease: what it published is taken
// over with the positions it published last.
func TestShardGroup_TakeoversOfACleanStop(t *testing.T) {
	all := hashrange.Set{{First: 0, Last: 99}}
	g := &shardGroup{dead: map[string]*unheldRange{}}
	if got := g.takeovers(map[string]publication{}, map[string]publication{"c": {set: all, positions: map[string]string{"cm": "5"}}}, all, nil, nil); len(got) != 0 {
		t.Fatalf("takeovers while c publishes everything = %v; want none", got)
	}
	got := g.takeovers(map[string]publication{}, map[string]publication{}, nil, nil, all)
	if len(got) != 1 || got[0].member != "c" || !got[0].part.Equal(all) || got[0].positions["cm"] != "5" {
		t.Fatalf("takeovers once c's Lease is gone = %+v; want c's whole range at its position 5", got)
	}
}

// A restarted member takes its own previous Lease over once: a part of
// it that another member held meanwhile and lets go later is taken over
// from that member, at its position, not again from the previous
// instance's.
func TestShardGroup_TakeoversOfAPreviousInstanceOnce(t *testing.T) {
	r := func(first, last uint64) hashrange.Set { return hashrange.Set{{First: first, Last: last}} }
	g := &shardGroup{o: ShardOptions{Member: "a"}, dead: map[string]*unheldRange{}}
	g.notePrevious(&coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{Annotations: map[string]string{
			shards.AnnotationSelector: r(0, 99).Selector(),
			annotationPositions:       `{"cm":"1"}`,
		}},
		Spec: coordinationv1.LeaseSpec{HolderIdentity: ptr.To("a_old")},
	})
	checkLiveSteps(t, g, []liveStep{
		{"b took half while a was down: a grows into the other half", map[string]publication{"b": {set: r(50, 99), positions: map[string]string{"cm": "8"}}}, r(50, 99), nil, r(0, 49), "a[0-49]@map[cm:1] "},
		{"nothing moves", map[string]publication{"b": {set: r(50, 99), positions: map[string]string{"cm": "9"}}}, r(50, 99), r(0, 49), r(0, 49), ""},
		{"b lets its half go here: from b's position only", map[string]publication{"b": {set: nil, positions: map[string]string{"cm": "12"}}}, nil, r(0, 49), r(0, 99), "b[50-99]@map[cm:9] "},
		{"a's half leaves and comes back: no takeover", map[string]publication{"b": {set: nil}}, nil, r(0, 99), r(50, 99), ""},
		{"and comes back", map[string]publication{"b": {set: nil}}, nil, r(50, 99), r(0, 99), ""},
	})
}

// A member whose renewals go unanswered for a LeaseDuration drops its
// range and lets it go at the positions it published last: growing back
// into it before another member publishes it takes it over, so the
// deletes made while no handler held it are given.
func TestShardGroup_LapseLetsTheRangeGo(t *testing.T) {
	g, err := newShardGroup(&rest.Config{Host: "http://127.0.0.1:1"}, ShardOptions{Group: "g", Member: "a", Namespace: "default",
		LeaseDuration: 2 * time.Second, RenewInterval: time.Second}, logr.Discard(), testHooks{})
	if err != nil {
		t.Fatal(err)
	}
	all := hashrange.Set{{First: 0, Last: 99}}
	g.join(newShardFilter(g, nil, nil)) // a handler applying the growth: the positions stay those published
	g.published = map[string]string{"cm": "5"}
	g.setHeld(all, nil)
	g.tick(context.Background()) // no apiserver answers: the Lease lapsed
	if held, _, _ := g.current(); !held.Empty() {
		t.Fatalf("held after a lapse = %v; want none (LastError %v)", held, g.status().LastError)
	}
	got := g.takeovers(map[string]publication{}, map[string]publication{}, nil, nil, all)
	if len(got) != 1 || got[0].member != "a" || !got[0].part.Equal(all) || got[0].positions["cm"] != "5" {
		t.Fatalf("takeovers growing back after the lapse = %+v; want a's own range at its position 5", got)
	}
}

// A growth that takes part of another member's range over publishes,
// until its handlers apply it, positions no later than the takeover's:
// a member taking over from this one's Lease meanwhile gives the deletes
// its handlers have not been given yet.
func TestShardGroup_PositionsLoweredByATakeover(t *testing.T) {
	g := &shardGroup{changed: make(chan struct{}), filters: map[*shardFilter]struct{}{}, trackers: map[*feed]*position.Tracker{}}
	g.published = map[string]string{"cm": "9", "secret": "3", "pod": "6"}
	g.join(newShardFilter(g, nil, nil))
	part := hashrange.Set{{First: 0, Last: 99}}
	g.setHeld(part, []takeover{{member: "d", part: part, positions: map[string]string{"cm": "4", "secret": "7"}}})
	want := map[string]string{"cm": "4", "secret": "3", "pod": "6"}
	if got := g.positions(); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("positions() while a handler applies a growth taking d's range over = %v; want %v", got, want)
	}
}

// With no handler yet, the takeovers kept for the first handlers' replay
// stay within H: a part that leaves H is no longer this member's to give,
// so a range moving back and forth keeps only the takeovers of what it
// holds.
func TestShardGroup_TakeoversKeptWithinTheRangeHeld(t *testing.T) {
	g := &shardGroup{changed: make(chan struct{}), filters: map[*shardFilter]struct{}{}}
	a, b := hashrange.Set{{First: 0, Last: 49}}, hashrange.Set{{First: 50, Last: 99}}
	for range 100 {
		g.setHeld(a, []takeover{{member: "d", part: a}})
		g.setHeld(b, []takeover{{member: "e", part: b}})
	}
	g.publishable()
	if len(g.takes) != 1 || g.takes[0].member != "e" || !g.takes[0].part.Equal(b) {
		t.Fatalf("takeovers kept after 100 moves between %v and %v: %d, the first %+v; want e's %v alone", a, b, len(g.takes), g.takes[:min(len(g.takes), 2)], b)
	}
}

// A live member whose selector does not parse may still deliver any key:
// it counts as publishing the whole space, so this member grows into
// none of it, and as showing what it showed before, so nothing it
// published is judged let go.
func TestShardGroup_PublicationsOfAnUnparsableSelector(t *testing.T) {
	half := hashrange.Set{{First: 0, Last: 99}}
	g := &shardGroup{o: ShardOptions{Member: "a"}, dead: map[string]*unheldRange{},
		lastLive: map[string]publication{"b": {set: half, positions: map[string]string{"cm": "5"}}}}
	v := shards.View{Live: []string{"a", "b"}, Leases: map[string]*coordinationv1.Lease{
		"b": {ObjectMeta: metav1.ObjectMeta{Annotations: map[string]string{shards.AnnotationMember: "b", shards.AnnotationSelector: "shardRange(garbage"}}},
	}}
	others, dead, shows := g.publications(v)
	if !others.Equal(hashrange.Full()) || len(dead) != 0 {
		t.Fatalf("publications with b's selector unparsable = others %v, dead %v; want the whole space, none dead", others, dead)
	}
	if got := g.takeovers(dead, shows, others, nil, nextHeld(nil, hashrange.Full(), others)); len(got) != 0 {
		t.Fatalf("takeovers while b's selector does not parse = %+v; want none", got)
	}
	// b's Lease reads again: b let its half go, at the position it showed
	// while it still published it.
	got := g.takeovers(map[string]publication{}, map[string]publication{"b": {positions: map[string]string{"cm": "9"}}}, nil, nil, half)
	if len(got) != 1 || got[0].member != "b" || !got[0].part.Equal(half) || got[0].positions["cm"] != "5" {
		t.Fatalf("takeovers once b's Lease reads again and shows nothing = %+v; want b's %v at its position 5", got, half)
	}
}
