// Package hashrange is the pure arithmetic of sharding a resource by the
// hash of its objects' UIDs, as KEP-5866 (ListOptions.ShardSelector,
// k8s.io/apimachinery v0.37.2, alpha feature gate ShardedListAndWatch)
// defines it, and the split of that hash space among the members of a
// shard group.
//
// # The hash
//
// Hash is the 64-bit FNV-1a hash of the bytes of metadata.uid as the
// server sends it (the UID's text, e.g. "07c665ed-9f17-4777-85a1-2b276f4bf0b8"):
// k8s.io/apimachinery/pkg/sharding.HashField, which the apiserver's
// SelectionPredicate.MatchesSharding calls with ResolveFieldValue's
// string(accessor.GetUID()). A key lands in the same shard whether the
// server filters (shardSelector) or the client does (Set.ContainsUID).
//
// # Ranges and selectors
//
// A Range is [First, Last], both inclusive, so that the whole space,
// [0, 2^64-1], fits in uint64. On the wire a range is KEP-5866's
// shardRange(object.metadata.uid, '0x<start>', '0x<end>') with start
// inclusive, end exclusive (end = Last+1), each exactly 16 lowercase hex
// digits, except the end 2^64, written '0x10000000000000000': the
// apiserver v1.37.2 refuses shorter spellings such as '0x0' with a 500
// "invalid shard selector" (although the field's doc comment shows them).
// A Set is a union of ranges, written as shardRange(...) || shardRange(...),
// which the apiserver accepts: one selector carries all of a member's
// ranges, matched with one hash per object and one comparison per range.
//
// A Set is kept canonical: ranges sorted, disjoint and not adjacent
// (Normalize merges them), so two Sets that select the same hashes are
// equal and print the same selector.
//
// # Assignment
//
// Assign splits the space among members by rendezvous (highest random
// weight) hashing over a fixed number of equal buckets (DefaultBuckets,
// 256): each bucket goes to the member whose weight hash(member, bucket)
// is highest. When a member leaves, only its buckets move, each to the
// member with the next highest weight; when one joins, only the buckets it
// now wins move, about 1/N of the space: the least any split can move. An
// even split of the sorted members ([i/N, (i+1)/N)) keeps one range per
// member but moves about half of the space on every change, so every
// member would relist; rendezvous costs more ranges per member (about
// B/N·(1-1/N) after merging: 57 for 3 members of 256 buckets, a selector
// of about 4.5 KiB), which the server matches in one pass per object.
// With B buckets a member's share deviates from 1/N by about
// sqrt((N-1)/B) relative (±9% for 3 members of 256 buckets).
package hashrange

import (
	"cmp"
	"errors"
	"fmt"
	"hash/fnv"
	"math"
	"math/bits"
	"slices"
	"strconv"
	"strings"
)

// Field is the field path the selectors hash: the only one watchjournal
// uses (KEP-5866 also allows object.metadata.namespace).
const Field = "object.metadata.uid"

// Hash returns the 64-bit FNV-1a hash of uid's bytes, as the apiserver
// computes it for shardRange(object.metadata.uid, …).
func Hash(uid string) uint64 {
	h := fnv.New64a()
	_, _ = h.Write([]byte(uid))
	return h.Sum64()
}

// Range is the hashes First through Last, both inclusive.
type Range struct {
	First, Last uint64
}

// Contains reports whether h is in r.
func (r Range) Contains(h uint64) bool { return h >= r.First && h <= r.Last }

// String returns r as one KEP-5866 shardRange term.
func (r Range) String() string {
	end := "0x10000000000000000"
	if r.Last != math.MaxUint64 {
		end = fmt.Sprintf("0x%016x", r.Last+1)
	}
	return fmt.Sprintf("shardRange(%s, '0x%016x', '%s')", Field, r.First, end)
}

// Set is a union of hash ranges in canonical form: sorted, disjoint, not
// adjacent. The zero Set is empty. Build one with Normalize, Full or
// Parse; the methods return canonical Sets.
type Set []Range

// Full returns the whole hash space.
func Full() Set { return Set{{0, math.MaxUint64}} }

// Normalize returns the canonical Set of the hashes of rs: sorted, with
// overlapping and adjacent ranges merged. A range with First > Last is
// dropped.
func Normalize(rs []Range) Set {
	in := make([]Range, 0, len(rs))
	for _, r := range rs {
		if r.First <= r.Last {
			in = append(in, r)
		}
	}
	slices.SortFunc(in, func(a, b Range) int { return cmp.Compare(a.First, b.First) })
	var out Set
	for _, r := range in {
		if n := len(out); n > 0 && (out[n-1].Last == math.MaxUint64 || r.First <= out[n-1].Last+1) {
			out[n-1].Last = max(out[n-1].Last, r.Last)
			continue
		}
		out = append(out, r)
	}
	return out
}

// Empty reports whether s holds no hash.
func (s Set) Empty() bool { return len(s) == 0 }

// Contains reports whether hash h is in s.
func (s Set) Contains(h uint64) bool {
	i, _ := slices.BinarySearchFunc(s, h, func(r Range, h uint64) int {
		switch {
		case r.Last < h:
			return -1
		case r.First > h:
			return 1
		}
		return 0
	})
	return i < len(s) && s[i].Contains(h)
}

// ContainsUID reports whether the hash of uid is in s.
func (s Set) ContainsUID(uid string) bool { return s.Contains(Hash(uid)) }

// Equal reports whether s and o hold the same hashes.
func (s Set) Equal(o Set) bool { return slices.Equal(s, o) }

// Union returns the hashes in s or o.
func (s Set) Union(o Set) Set { return Normalize(append(slices.Clone(s), o...)) }

// Minus returns the hashes in s and not in o.
func (s Set) Minus(o Set) Set {
	var out []Range
	for _, r := range s {
		cur := []Range{r}
		for _, x := range o {
			var next []Range
			for _, c := range cur {
				if x.Last < c.First || x.First > c.Last {
					next = append(next, c)
					continue
				}
				if x.First > c.First {
					next = append(next, Range{c.First, x.First - 1})
				}
				if x.Last < c.Last {
					next = append(next, Range{x.Last + 1, c.Last})
				}
			}
			cur = next
		}
		out = append(out, cur...)
	}
	return Normalize(out)
}

// Intersect returns the hashes in both s and o.
func (s Set) Intersect(o Set) Set { return s.Minus(s.Minus(o)) }

// Covers reports whether every hash of o is in s.
func (s Set) Covers(o Set) bool { return o.Minus(s).Empty() }

// Share returns the fraction of the hash space s holds, from 0 to 1.
func (s Set) Share() float64 {
	var n float64
	for _, r := range s {
		n += float64(r.Last-r.First) + 1
	}
	return n / math.Exp2(64)
}

// Selector returns s as a KEP-5866 shardSelector: its ranges as
// shardRange terms joined by " || ", "" for the empty Set (which no
// selector expresses: the apiserver refuses an empty one).
func (s Set) Selector() string {
	parts := make([]string, len(s))
	for i, r := range s {
		parts[i] = r.String()
	}
	return strings.Join(parts, " || ")
}

// String returns the selector, or "none" for the empty Set.
func (s Set) String() string {
	if s.Empty() {
		return "none"
	}
	return s.Selector()
}

// ErrSyntax is matched (errors.Is) by the error of Parse for text that is
// not a shard selector of object.metadata.uid in KEP-5866's syntax.
var ErrSyntax = errors.New("hashrange: invalid shard selector")

// Selected returns the hash ranges a file's shard selector selects: the
// whole space for "" (an unsharded file), else Parse(selector). Errors
// match ErrSyntax.
func Selected(selector string) (Set, error) {
	if selector == "" {
		return Full(), nil
	}
	return Parse(selector)
}

// ParseOrEmpty returns the hash ranges of a recorded set of ranges (a
// journal's pending ranges, the part a Reshard entered): the empty Set for
// "", else Parse(selector). Errors match ErrSyntax.
func ParseOrEmpty(selector string) (Set, error) {
	if selector == "" {
		return nil, nil
	}
	return Parse(selector)
}

// Parse reads a shardSelector of object.metadata.uid ranges joined by
// "||", in the apiserver's syntax (single- or double-quoted 0x hex bounds,
// start inclusive, end exclusive, end at most 0x10000000000000000, start
// below end), and returns its canonical Set. Unlike the apiserver it also
// takes bounds of fewer than 16 digits. Errors match ErrSyntax.
func Parse(sel string) (Set, error) {
	bad := func(why string) (Set, error) {
		s := sel
		if len(s) > 200 {
			s = s[:200] + "…"
		}
		return nil, fmt.Errorf("%w %q: %s", ErrSyntax, s, why)
	}
	if strings.TrimSpace(sel) == "" {
		return bad("empty")
	}
	var rs []Range
	for _, term := range strings.Split(sel, "||") {
		t := strings.TrimSpace(term)
		args, ok := strings.CutPrefix(t, "shardRange(")
		if !ok || !strings.HasSuffix(args, ")") {
			return bad("want shardRange(object.metadata.uid, '0x…', '0x…') terms joined by ||")
		}
		f := strings.Split(strings.TrimSuffix(args, ")"), ",")
		if len(f) != 3 || strings.TrimSpace(f[0]) != Field {
			return bad("want shardRange(" + Field + ", START, END)")
		}
		start, err := parseBound(f[1])
		if err != nil {
			return bad(err.Error())
		}
		end, err := parseBound(f[2])
		if err != nil {
			return bad(err.Error())
		}
		if start.hi || !end.hi && end.v <= start.v {
			return bad("start must be below end")
		}
		last := end.v - 1
		if end.hi {
			last = math.MaxUint64
		}
		rs = append(rs, Range{start.v, last})
	}
	return Normalize(rs), nil
}

// bound is a parsed hex bound: v, or 2^64 when hi.
type bound struct {
	v  uint64
	hi bool
}

func parseBound(s string) (bound, error) {
	s = strings.TrimSpace(s)
	if len(s) < 2 || (s[0] != '\'' && s[0] != '"') || s[len(s)-1] != s[0] {
		return bound{}, fmt.Errorf("bound %s: want a quoted '0x…' literal", s)
	}
	hex, ok := strings.CutPrefix(s[1:len(s)-1], "0x")
	if !ok || hex == "" || strings.ToLower(hex) != hex {
		return bound{}, fmt.Errorf("bound %s: want lowercase hex after 0x", s)
	}
	if strings.TrimLeft(hex, "0") == "10000000000000000" {
		return bound{hi: true}, nil
	}
	v, err := strconv.ParseUint(hex, 16, 64)
	if err != nil {
		return bound{}, fmt.Errorf("bound %s: %v", s, err)
	}
	return bound{v: v}, nil
}

// DefaultBuckets is the number of equal buckets Assign splits the hash
// space into when given 0.
const DefaultBuckets = 256

// Assign splits the hash space among members (names, each once; order
// does not matter) by rendezvous hashing over buckets equal buckets, a
// power of two from 1 to 65536 (0: DefaultBuckets), and returns each
// member's canonical Set. The Sets are disjoint and cover the space; the
// same members give the same split in every process. No member gives an
// empty map. It panics on a bucket count that is not a power of two in
// range.
func Assign(members []string, buckets int) map[string]Set {
	if buckets == 0 {
		buckets = DefaultBuckets
	}
	if buckets < 1 || buckets > 1<<16 || buckets&(buckets-1) != 0 {
		panic(fmt.Sprintf("hashrange: Assign: %d buckets: want a power of two from 1 to 65536", buckets))
	}
	out := make(map[string]Set, len(members))
	if len(members) == 0 {
		return out
	}
	shift := 64 - uint(bits.TrailingZeros(uint(buckets)))
	width := uint64(0)
	if shift < 64 {
		width = 1 << shift
	}
	ranges := make(map[string][]Range, len(members))
	for b := range buckets {
		best, bestW := "", uint64(0)
		for _, m := range members {
			if w := weight(m, b); best == "" || w > bestW || w == bestW && m < best {
				best, bestW = m, w
			}
		}
		first := uint64(b) * width
		last := first + width - 1 // width 0 (one bucket): MaxUint64
		ranges[best] = append(ranges[best], Range{first, last})
	}
	for _, m := range members {
		out[m] = Normalize(ranges[m])
	}
	return out
}

// weight is the rendezvous weight of member m for bucket b: FNV-1a of the
// member's name and the bucket's number, mixed by splitmix64's finalizer
// (FNV-1a alone changes little in its high bits for a changed last byte).
func weight(m string, b int) uint64 {
	h := fnv.New64a()
	_, _ = h.Write([]byte(m))
	_, _ = h.Write([]byte{0, byte(b >> 8), byte(b)})
	x := h.Sum64()
	x ^= x >> 30
	x *= 0xbf58476d1ce4e5b9
	x ^= x >> 27
	x *= 0x94d049bb133111eb
	x ^= x >> 31
	return x
}
