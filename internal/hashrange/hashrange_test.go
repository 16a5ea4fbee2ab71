package hashrange_test

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/sharding"
	"k8s.io/apimachinery/pkg/types"

	"github.com/watchjournal/watchjournal/internal/hashrange"
)

func uid(r *rand.Rand) string {
	return fmt.Sprintf("%08x-%04x-%04x-%04x-%012x", r.Uint32(), r.Uint32()&0xffff, r.Uint32()&0xffff, r.Uint32()&0xffff, r.Uint64()&0xffffffffffff)
}

// The hash and the ranges agree with apimachinery's matcher, the one the
// apiserver runs (SelectionPredicate.MatchesSharding).
func TestSetMatchesApimachinery(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for i := range 200 {
		u := uid(r)
		if got, want := fmt.Sprintf("%016x", hashrange.Hash(u)), sharding.HashField(u); got != want {
			t.Fatalf("Hash(%q) = %s; want %s", u, got, want)
		}
		a, b := r.Uint64(), r.Uint64()
		set := hashrange.Normalize([]hashrange.Range{{min(a, b), max(a, b)}, {r.Uint64() | 1<<63, math.MaxUint64}})
		if i%7 == 0 {
			set = hashrange.Full()
		}
		var reqs []sharding.ShardRangeRequirement
		for _, term := range strings.Split(set.Selector(), " || ") {
			f := strings.Split(strings.TrimSuffix(strings.TrimPrefix(term, "shardRange("), ")"), ", ")
			reqs = append(reqs, sharding.ShardRangeRequirement{Key: f[0], Start: strings.Trim(f[1], "'"), End: strings.Trim(f[2], "'")})
		}
		sel := sharding.NewSelector(reqs...)
		for range 20 {
			u := uid(r)
			want, err := sel.Matches(&metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{UID: types.UID(u)}})
			if err != nil {
				t.Fatal(err)
			}
			if got := set.ContainsUID(u); got != want {
				t.Fatalf("%v.ContainsUID(%q) = %v; apimachinery says %v", set, u, got, want)
			}
		}
	}
}

func TestParseAndSelector(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"shardRange(object.metadata.uid, '0x0000000000000000', '0x10000000000000000')",
			"shardRange(object.metadata.uid, '0x0000000000000000', '0x10000000000000000')"},
		{"shardRange(object.metadata.uid, '0x8000000000000000', '0x10000000000000000') || shardRange(object.metadata.uid,'0x0','0x8000000000000000')",
			"shardRange(object.metadata.uid, '0x0000000000000000', '0x10000000000000000')"},
		{`shardRange(object.metadata.uid, "0x10", "0x20") || shardRange(object.metadata.uid, '0x30', '0x40')`,
			"shardRange(object.metadata.uid, '0x0000000000000010', '0x0000000000000020') || shardRange(object.metadata.uid, '0x0000000000000030', '0x0000000000000040')"},
	} {
		s, err := hashrange.Parse(tc.in)
		if err != nil {
			t.Fatalf("Parse(%q): %v", tc.in, err)
		}
		if got := s.Selector(); got != tc.want {
			t.Errorf("Parse(%q).Selector() = %q; want %q", tc.in, got, tc.want)
		}
	}
	for _, in := range []string{"", "shardRange(object.metadata.name, '0x0', '0x1')", "shardRange(object.metadata.uid, '0x2', '0x1')",
		"shardRange(object.metadata.uid, '0x0', '0x20000000000000000')", "shardRange(object.metadata.uid, '0xAB', '0xff')", "x || y"} {
		if _, err := hashrange.Parse(in); !errors.Is(err, hashrange.ErrSyntax) {
			t.Errorf("Parse(%q) error = %v; want ErrSyntax", in, err)
		}
	}
}

func TestSetOps(t *testing.T) {
	full := hashrange.Full()
	half := hashrange.Set{{0, 1<<63 - 1}}
	rest := full.Minus(half)
	if want := (hashrange.Set{{1 << 63, math.MaxUint64}}); !rest.Equal(want) {
		t.Fatalf("Full().Minus(%v) = %v; want %v", half, rest, want)
	}
	if !half.Union(rest).Equal(full) || !half.Intersect(rest).Empty() || !full.Covers(half) || half.Covers(full) {
		t.Fatalf("union/intersect/covers of %v and %v wrong", half, rest)
	}
	if got := half.Share(); got != 0.5 {
		t.Fatalf("Share = %v; want 0.5", got)
	}
}

// Assign covers the space with disjoint sets, and a member leaving or
// joining moves only what it had or wins.
func TestAssignMovesLittle(t *testing.T) {
	members := []string{"a", "b", "c"}
	three := hashrange.Assign(members, 0)
	var all hashrange.Set
	for _, m := range members {
		s := three[m]
		if !all.Intersect(s).Empty() {
			t.Fatalf("%s's set overlaps another's", m)
		}
		all = all.Union(s)
		if share := s.Share(); share < 0.25 || share > 0.42 {
			t.Errorf("%s's share = %.3f; want about 1/3", m, share)
		}
		t.Logf("%s: %d ranges, share %.3f", m, len(s), s.Share())
	}
	if !all.Equal(hashrange.Full()) {
		t.Fatalf("union = %v; want the whole space", all)
	}
	two := hashrange.Assign([]string{"a", "c"}, 0)
	for _, m := range []string{"a", "c"} {
		if !two[m].Covers(three[m]) {
			t.Errorf("%s lost hashes when b left: %v", m, three[m].Minus(two[m]))
		}
	}
	if !two["a"].Union(two["c"]).Equal(hashrange.Full()) {
		t.Errorf("a and c do not cover the space")
	}
	four := hashrange.Assign([]string{"a", "b", "c", "d"}, 0)
	for _, m := range members {
		if !three[m].Covers(four[m]) {
			t.Errorf("%s gained hashes when d joined: %v", m, four[m].Minus(three[m]))
		}
	}
}

// Ensure that Selected reads "" as the whole hash space, ParseOrEmpty as
// none, and that Selected refuses a selector that does not parse.
func TestSelected(t *testing.T) {
	if s, err := hashrange.Selected(""); err != nil || !s.Equal(hashrange.Full()) {
		t.Fatalf(`Selected("") = %v, %v; want the whole space`, s, err)
	}
	if _, err := hashrange.Selected("no such syntax"); !errors.Is(err, hashrange.ErrSyntax) {
		t.Fatalf("Selected(bad) = %v; want hashrange.ErrSyntax", err)
	}
	if s, err := hashrange.ParseOrEmpty(""); err != nil || !s.Empty() {
		t.Fatalf(`ParseOrEmpty("") = %v, %v; want the empty set`, s, err)
	}
	if s, err := hashrange.ParseOrEmpty(hashrange.Full().Selector()); err != nil || !s.Equal(hashrange.Full()) {
		t.Fatalf("ParseOrEmpty(full) = %v, %v; want the whole space", s, err)
	}
}
