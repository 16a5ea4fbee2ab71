package shards

// A Lease is judged by this replica's clock alone. Its
// spec.renewTime is written by its holder's clock, which may be minutes off
// this one's: compared with the local clock, a peer whose clock is behind
// by the lease duration looks dead while it renews, and one whose clock is
// ahead looks live long after it died, so two replicas could disagree about
// the live set, and so about the split. As client-go's leader election does
// (observedRecord, observedTime), a member remembers, per Lease, the last
// renewal record it saw (holderIdentity, renewTime, leaseDurationSeconds)
// and the local time at which it first saw that record; the Lease is live
// until the local clock passes that time plus leaseDurationSeconds. The
// remote clock only tells renewals apart: a renewal changes renewTime.
//
// The cost: a Lease first seen (a member starting, or a new peer) counts
// as renewed at that moment, so a Lease that had expired long before is
// taken for live for one more lease duration; a dead member's range waits
// that long after a survivor's start. Elapsed local time is read from
// time.Time values that carry Go's monotonic clock, so a step of the wall
// clock does not move it.

import (
	"maps"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	"k8s.io/utils/ptr"
)

// record is what a renewal changes on a Lease.
type record struct {
	holder, renew string
	secs          int32
}

// observation is a Lease's last record and when this replica saw it first.
type observation struct {
	rec record
	at  time.Time
}

// observer judges Leases by the time this replica observed their renewals.
// Not safe for concurrent use: a member's Run goroutine owns it.
type observer struct {
	seen map[string]observation // by Lease name
}

func recordOf(l *coordinationv1.Lease) record {
	r := record{holder: ptr.Deref(l.Spec.HolderIdentity, ""), secs: ptr.Deref(l.Spec.LeaseDurationSeconds, 0)}
	if t := l.Spec.RenewTime; t != nil {
		r.renew = t.UTC().Format(time.RFC3339Nano)
	}
	return r
}

// expired records what l shows at the local time now and reports whether
// its holder has not renewed it within its duration as this replica saw it:
// no renewal record since now minus leaseDurationSeconds, by the local
// clock. A Lease with no renewTime or no duration is expired.
func (o *observer) expired(l *coordinationv1.Lease, now time.Time) bool {
	if l.Spec.RenewTime == nil || l.Spec.LeaseDurationSeconds == nil {
		return true
	}
	if o.seen == nil {
		o.seen = map[string]observation{}
	}
	rec := recordOf(l)
	ob, ok := o.seen[l.Name]
	if !ok || ob.rec != rec {
		ob = observation{rec: rec, at: now}
		o.seen[l.Name] = ob
	}
	return !now.Before(ob.at.Add(time.Duration(rec.secs) * time.Second))
}

// forget drops what was observed of the Leases not in names (deleted ones).
func (o *observer) forget(names map[string]bool) {
	maps.DeleteFunc(o.seen, func(n string, _ observation) bool { return !names[n] })
}
