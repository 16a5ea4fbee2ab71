package jcache

// Dead Leases. A member that dies without deleting its Lease (killed, or
// its node lost) leaves it expired; with pod names that change, no later
// instance takes it over. Such a Lease is deleted by the first member
// that sees the live members publish its whole range: from then on, no
// member takes that range over from it (each live member follows the
// range as a live publication instead), so the Lease says nothing more.
// Kept, it would count as live for one LeaseDuration in the view of each
// member that starts (shards/observe.go: a Lease first seen is live), and
// a range let go meanwhile would be left to it.
//
// A Lease that carries an index manifest (shards.AnnotationIndex: a
// journal member's) is left to shards.Member, which deletes its index
// chunks with it.

import (
	"context"
	"errors"

	coordinationv1 "k8s.io/api/coordination/v1"

	"github.com/watchjournal/watchjournal/internal/hashrange"
	"github.com/watchjournal/watchjournal/shards"
)

// collect deletes the Leases of v.Gone whose range the live members'
// Leases in v and this member's publication pub cover (a Lease that
// publishes nothing is covered). A selector that does not parse is not
// covered: its Lease stays. Errors are logged; the next view tries again.
// Run's goroutine only.
func (g *shardGroup) collect(ctx context.Context, v shards.View, pub hashrange.Set) {
	all := pub
	for _, l := range v.Leases {
		if s, err := hashrange.Parse(l.Annotations[shards.AnnotationSelector]); err == nil {
			all = all.Union(s)
		}
	}
	for _, l := range v.Gone {
		if !collectable(l, all) {
			continue
		}
		name := l.Annotations[shards.AnnotationMember]
		switch err := g.ms.DeleteGone(ctx, l); {
		case errors.Is(err, shards.ErrLeaseChanged):
			// Renewed or taken over since the listing: the next view judges it.
		case err != nil:
			g.log.Info("could not delete a dead member's shard Lease", "dead", name, "error", err.Error())
		default:
			g.log.Info("deleted a dead member's shard Lease: the live members publish its range", "dead", name)
		}
	}
}

// collectable reports whether l, a Lease not live, can be deleted: it
// carries no index manifest and all covers the range it published.
func collectable(l *coordinationv1.Lease, all hashrange.Set) bool {
	if l.Annotations[shards.AnnotationIndex] != "" {
		return false
	}
	sel := l.Annotations[shards.AnnotationSelector]
	if sel == "" {
		return true
	}
	s, err := hashrange.Parse(sel)
	return err == nil && all.Covers(s)
}
