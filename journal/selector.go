package journal

// A file records its Resource; Open refuses another (ErrResourceMismatch).
// A file records its resource's selectors as the caller spelled them, and
// Open compares them in canonical form: "tier=web,app=x", "app=x,tier=web",
// "app = x, tier == web" and "app in (x),tier=web" select the same objects
// (API concepts, "Labels and Selectors": = and == are the same operator,
// requirements are ANDed, a set of one value is that value), so they name
// the same resource. A selector that selects other objects is another
// resource (ErrResourceMismatch).

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/selection"
)

// errInvalidSelector marks a selector that does not parse: it is the same
// resource only as the same text.
var errInvalidSelector = errors.New("journal: invalid selector")

// canonicalLabels returns the label selector s in one spelling per meaning:
// requirements sorted and without duplicates, == written =, "in" and "notin"
// with one value written = and !=, set values sorted, no spaces.
func canonicalLabels(s string) (string, error) {
	sel, err := labels.Parse(s)
	if err != nil {
		return "", fmt.Errorf("%w: label selector %q: %v", errInvalidSelector, clip(s), clip(err.Error()))
	}
	reqs, _ := sel.Requirements()
	out := make([]string, 0, len(reqs))
	for _, r := range reqs {
		op, vals := r.Operator(), r.Values().List() // List is sorted
		switch {
		case op == selection.DoubleEquals:
			op = selection.Equals
		case op == selection.In && len(vals) == 1:
			op = selection.Equals
		case op == selection.NotIn && len(vals) == 1:
			op = selection.NotEquals
		}
		nr, err := labels.NewRequirement(r.Key(), op, vals)
		if err != nil {
			return "", fmt.Errorf("%w: label selector %q: %v", errInvalidSelector, clip(s), clip(err.Error()))
		}
		out = append(out, nr.String())
	}
	slices.Sort(out)
	return strings.Join(slices.Compact(out), ","), nil
}

// canonicalFields returns the field selector s in one spelling per
// meaning: requirements sorted and without duplicates, == written =,
// values escaped as fields.EscapeValue does. Spaces are kept: neither
// fields.ParseSelector nor the apiserver trims them, so "a == b" selects on
// field "a " and value " b".
func canonicalFields(s string) (string, error) {
	sel, err := fields.ParseSelector(s)
	if err != nil {
		return "", fmt.Errorf("%w: field selector %q: %v", errInvalidSelector, clip(s), clip(err.Error()))
	}
	reqs := sel.Requirements()
	out := make([]string, 0, len(reqs))
	for _, r := range reqs {
		op := r.Operator
		if op == selection.DoubleEquals {
			op = selection.Equals
		}
		out = append(out, r.Field+string(op)+fields.EscapeValue(r.Value))
	}
	slices.Sort(out)
	return strings.Join(slices.Compact(out), ","), nil
}

// canonical returns r with its selectors in canonical form, and an error
// matching errInvalidSelector when one does not parse.
func (r Resource) canonical() (Resource, error) {
	var err error
	if r.LabelSelector, err = canonicalLabels(r.LabelSelector); err != nil {
		return r, err
	}
	if r.FieldSelector, err = canonicalFields(r.FieldSelector); err != nil {
		return r, err
	}
	r.ShardSelector, err = canonicalShard(r.ShardSelector)
	return r, err
}

// sameAs reports whether r and o name the same resource: equal, or equal
// once both selectors are in canonical form. A selector that does not
// parse is the same only as the same text.
func (r Resource) sameAs(o Resource) bool {
	if r == o {
		return true
	}
	cr, err1 := r.canonical()
	co, err2 := o.canonical()
	return err1 == nil && err2 == nil && cr == co
}

// clip shortens s to at most 200 bytes for an error message, marking the
// cut: a selector is untrusted input of any length.
func clip(s string) string {
	if len(s) <= 200 {
		return s
	}
	return s[:200] + fmt.Sprintf("…(%d bytes)", len(s))
}
