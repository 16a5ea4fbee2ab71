// Package shards splits one resource's journal across the replicas of an
// operator (issue 14): each replica, a Member of a shard group, journals
// the objects whose UID hashes into its share of the hash space
// (KEP-5866's shardSelector; package hashrange), into a file of its own,
// and the shares follow the group's live members. Membership is kept on
// coordination.k8s.io/v1 Leases, the distributed engine every operator
// already has: no consensus of its own, no other datastore.
//
// # Membership
//
// Each member holds one Lease, <group>-<member> in Options.Namespace,
// labelled watchjournal.io/shard-group=<group>, with holderIdentity
// <member>_<random instance id> and leaseDurationSeconds, and renews it
// every RenewInterval (a third of LeaseDuration by default). The live set
// is the group's Leases renewed within leaseDurationSeconds as this
// replica saw it: the local time at which it first saw a Lease's current
// renewal (holder, renewTime, duration), plus the duration, is still
// ahead, as client-go's leader election judges a record (observe.go).
// Another replica's clock never enters: its renewTime only tells renewals
// apart, so replicas whose clocks disagree by more than LeaseDuration
// still agree on the live set. A Lease first seen counts as renewed then:
// a member that starts waits one LeaseDuration before it takes a Lease
// found expired. A member that cannot renew before its Lease expires
// stops journaling (StateLost): its loop stops, its file keeps what it
// holds, untouched, until it holds its Lease again. A Lease another
// instance holds and keeps renewing (the same member name started twice)
// is not taken over: the second instance waits (StateJoining).
//
// # Assignment
//
// Every member computes the same split from the same live set:
// hashrange.Assign, rendezvous hashing over 256 buckets, which moves only
// the leaving member's buckets when one leaves and about 1/N of the space
// when one joins (hashrange's package comment says why not an even split).
//
// # Handover
//
// A member's file records the range it holds (journal.Resource.ShardSelector)
// and changes it only through journalwrite.Writer.Reshard, with its loop
// stopped. Each member publishes on its Lease, in the annotation
// watchjournal.io/shard-selector, the range its journal holds and is synced
// with (empty while its loop has not synced since the last change). On
// every renewal a member compares its range cur with its target T:
//
//   - grow first: if T holds hashes cur lacks, the range becomes cur ∪ T
//     (Reshard records the part that entered as pending and the next loop
//     lists; the keys it finds there are journaled ADDED, reason moved);
//   - shrink only what others hold: the part of cur outside T is dropped
//     (its keys journaled DELETED, reason moved) only where another live
//     member's published range covers it.
//
// So a key that moves between live members is in the gaining member's
// journal (after its list) before it leaves the losing one's: consumers
// that read the union of the group's journals see it twice for a moment,
// never zero times, and each copy's ADDED/DELETED says moved. When a
// member dies, its range is in no live journal from the moment it stopped
// until the survivors see its Lease expire (LeaseDuration after they last
// saw it renewed, plus up to one RenewInterval) and their lists at the
// grown range commit; those lists diff against the index the dead member
// published ("Takeover"), so what changed in the meantime is journaled
// once, as the dead member would have journaled it.
// A member that leaves cleanly (Run's context ends) hands over without a
// gap: it marks its Lease leaving (annotation watchjournal.io/shard-leaving),
// which takes it out of the others' split and out of the holders they
// shrink against, keeps journaling until the others publish ranges that
// cover its own (or Options.LeaveTimeout passes), then deletes its Lease.
//
// A file new to the group (empty, never synced) takes its target at
// once; its first list journals ADDED with reason moved for the keys
// another live member holds (a replica joining a running group), and
// without a reason otherwise (the group's first members).
//
// # Takeover
//
// Whoever takes a dead member's range over must learn what it held, or a
// key deleted while no journal watched it is never journaled DELETED: the
// survivor never had it (issue 21). So every member publishes its index
// (key, UID, resourceVersion of each key its file holds) after its loop
// synced and whenever its journal moved, at most every IndexInterval: in
// Leases of the group's namespace named <group>-<member>-idx-<hash>, one
// per chunk of at most 128 KiB compressed, written once and named by
// their content, with a manifest on the member's Lease (AnnotationIndex)
// that names them; digest.go gives the format and the write order that
// keeps a reader's snapshot consistent. The group needs no permission
// beyond the Leases it already holds.
//
// A member whose range grows into a dead member's published range (the
// dead member's Lease is expired, not leaving, and no live member holds
// that part) reads that index, for the part it takes (the newest index
// where two overlap, by their Leases' resourceVersions), and its first list
// at the grown range diffs against it (reconcile.Options.Inherited): a key
// the dead member held as listed is journaled ADDED, reason moved; one
// listed at another resourceVersion MODIFIED; one no longer listed DELETED
// (the reason asked of the server, gone for a deleted object); one listed
// that it did not hold ADDED without a reason. Once the live members'
// published ranges cover the dead member's, any of them deletes its Lease
// and its index. A member that stops with LeaveTimeout negative while
// others are live publishes its final index and leaves its Lease to expire,
// so its range is taken over the same way; one that leaves cleanly, or
// alone, deletes its Lease and index.
//
// Exactness rests on the index being current when the member died: what
// it journaled after its last publication is journaled again by the new
// owner (a MODIFIED or DELETED twice, in two journals), and a key it added
// after that publication and that is deleted before the takeover is never
// journaled DELETED. IndexInterval (default RenewInterval) bounds that
// window; a publication scans the whole index (one read transaction) and
// writes the chunks that changed.
//
// A member that comes back on its old file after others took (part of)
// its range over hands that part back at once: its keys there are
// journaled DELETED, reason moved, and its next list brings them back as
// ADDED, moved; so it does not journal again the changes the others
// journaled while it was away. A member that had handed its range over on
// leaving does the same when it comes back: it lists its range instead of
// resuming its watch.
//
// # States
//
//	Joining   → Syncing    the Lease is held (created, or taken after expiry)
//	Syncing   → Serving    the loop synced at the recorded range; it is published
//	Serving   → Resharding the target differs (grow, or a shrink others cover)
//	Resharding→ Syncing    Reshard committed; a new loop runs at the new range
//	any       → Lost       the Lease could not be renewed before it expired
//	Lost      → Syncing    the Lease is held again
//	any       → Leaving    Run's context is done: the others take the range
//	Leaving   → Stopped    they hold it (or LeaveTimeout); the Lease is deleted
//
// # What it does not do
//
// It does not balance by object count (only by hash share: about ±9% for
// three members), does not hand over a dying member's range without a gap
// (no one can list ahead of a crash: the changes of the gap arrive as the
// takeover list's diff, "Takeover"), is exact after a crash only up to the
// dead member's last index publication, does not use an index for a leave
// that times out (LeaveTimeout passed before the others covered the range:
// they took it over while the member still journaled), and keeps one
// resource per Member.
package shards
