// Package suggest finds the names close to a mistyped one, for the "did
// you mean" of an unknown resource: reconcile.UnknownResourceError's
// Suggestions (New) and journalctl watch's error for its RESOURCE
// argument. One rule for both: a name is close within two edits
// (Levenshtein distance, from github.com/agnivade/levenshtein) and at most
// a third of its length, so a two-letter short name is never close.
package suggest

import (
	"slices"

	"github.com/agnivade/levenshtein"
)

// Distance returns the Levenshtein distance between typed and name (the
// fewest single-character insertions, deletions and substitutions that
// turn one into the other, counted in runes), and whether name is close
// to typed: at most 2, and at most a third of name's length.
func Distance(typed, name string) (d int, close bool) {
	d = levenshtein.ComputeDistance(typed, name)
	return d, d <= 2 && 3*d <= len(name)
}

// Closest returns the names close to typed (Distance), closest first;
// names at the same distance keep their order.
func Closest(typed string, names []string) []string {
	type cand struct {
		name string
		d    int
	}
	var cs []cand
	for _, n := range names {
		if d, ok := Distance(typed, n); ok {
			cs = append(cs, cand{n, d})
		}
	}
	slices.SortStableFunc(cs, func(a, b cand) int { return a.d - b.d })
	var out []string
	for _, c := range cs {
		out = append(out, c.name)
	}
	return out
}
