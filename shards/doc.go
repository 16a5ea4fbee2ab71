// Package shards splits one resource's journal across the replicas of an
// operator: each replica, a Member of a shard group, journals
// the objects whose UID hashes into its share of the hash space
// (KEP-5866's shardSelector), into a file of its own, and the shares
// follow the group's live members. Membership is kept on
// coordination.k8s.io/v1 Leases, the distributed engine every operator
// already has: no consensus of its own, no other datastore. Membership
// holds one member's Lease and its view of the others'; Member uses it,
// and so does the disk cache's sharding (package jcache, Options.Shard),
// so that both kinds of replica take part in a group the same way.
//
//	m, err := shards.Open(cfg, "configmaps.db", res, shards.Options{Group: "demo", Member: "replica-0"})
//	defer m.Close()
//	err = m.Run(ctx) // until ctx is done, then hands its range over
//
// # Guarantees
//
//   - Every member computes the same split from the same live set, judged
//     by its own clock alone (member.go, "Membership", "Assignment").
//   - A key that moves between live members is in the gaining member's
//     journal before it leaves the losing one's, with reason moved; a
//     member that leaves cleanly hands over without a gap (member.go,
//     "Handover", with the states).
//   - A dead member's range is taken over by diffing against the index it
//     published (digest.go, "Takeover").
//
// # What it does not do
//
// It does not balance by object count (only by hash share: about ±9% for
// three members), does not hand over a dying member's range without a gap
// (no one can list ahead of a crash: the changes of the gap arrive as the
// takeover list's diff, digest.go), is exact after a crash only up to the
// dead member's last index publication, does not use an index for a leave
// that times out (LeaveTimeout passed before the others covered the range:
// they took it over while the member still journaled), and keeps one
// resource per Member.
package shards
