package jcache

import (
	"fmt"
	"testing"

	"github.com/watchjournal/watchjournal/internal/hashrange"
)

// A dead member's range is taken over once, by the growth that takes it
// first; what a live member publishes is no takeover, and neither is a
// range this member grows into again after it moved between live members.
func TestShardGroup_TakeoversOfADeadRange(t *testing.T) {
	r := func(first, last uint64) hashrange.Set { return hashrange.Set{{First: first, Last: last}} }
	deadB := map[string]deadLease{"b": {set: r(0, 99), positions: map[string]string{"cm": "7"}}}
	describe := func(ts []takeover) string {
		out := ""
		for _, t := range ts {
			for _, p := range t.part {
				out += fmt.Sprintf("%s[%d-%d]@%v ", t.member, p.First, p.Last, t.positions)
			}
		}
		return out
	}
	g := &shardGroup{dead: map[string]*deadMember{}}
	for _, step := range []struct {
		name              string
		dead              map[string]deadLease
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
		if got := describe(g.takeovers(step.dead, step.others, step.cur, step.next)); got != step.want {
			t.Errorf("%s: takeovers(others %v, cur %v, next %v) = %q; want %q", step.name, step.others, step.cur, step.next, got, step.want)
		}
	}
}
