package shards

import (
	"testing"

	"github.com/watchjournal/watchjournal/internal/hashrange"
)

// The range a member moves to, from the range its file holds, its target
// and what the others hold.
func TestNextRange(t *testing.T) {
	q := func(i uint64) hashrange.Set { // quarter i of the space
		return hashrange.Set{{First: i << 62, Last: i<<62 + 1<<62 - 1}}
	}
	u := func(ss ...hashrange.Set) hashrange.Set {
		var out hashrange.Set
		for _, s := range ss {
			out = out.Union(s)
		}
		return out
	}
	full := hashrange.Full()
	for _, tc := range []struct {
		name                string
		cur, target, others hashrange.Set
		fresh               bool
		want                hashrange.Set
	}{
		{"an empty file takes its target at once", full, q(1), nil, true, q(1)},
		{"a member that holds its target stays", q(1), q(1), u(q(0), q(2), q(3)), false, nil},
		{"a survivor grows to its target and what it held", q(0), u(q(0), q(1)), q(2), false, u(q(0), q(1))},
		{"it grows before it shrinks", u(q(0), q(1)), u(q(0), q(2)), u(q(1), q(3)), false, u(q(0), q(1), q(2))},
		{"it keeps what no other member holds", u(q(0), q(1)), q(0), q(3), false, nil},
		{"it drops what another member holds", u(q(0), q(1)), q(0), q(1), false, q(0)},
		{"it drops only the part held", u(q(0), q(1), q(2)), q(0), q(2), false, u(q(0), q(1))},
		{"it never shrinks to nothing", q(1), nil, full, false, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := nextRange(tc.cur, tc.target, tc.others, tc.fresh)
			if !got.Equal(tc.want) {
				t.Errorf("nextRange(%v, %v, %v, %v) = %v; want %v", tc.cur, tc.target, tc.others, tc.fresh, got, tc.want)
			}
		})
	}
}
