package jcache

// Sharded handlers: a cache that is one member of a shard group gives its
// handlers only the objects of its hash range, so that each object of a
// sharded resource is reconciled by one replica.
//
// The split. Membership and the split are package shards': one
// coordination.k8s.io/v1 Lease per member (shards.LabelGroup,
// shards.AnnotationMember, the range held in shards.AnnotationSelector),
// judged by this replica's clock, and hashrange.Assign over the live
// members (rendezvous hashing, 256 buckets). One membership serves the
// whole cache: every sharded resource is cut by the same range
// (shardgroup.go).
//
// The key an object hashes by is its controller owner's UID when it has a
// controller ownerReference, else its own UID (shardUID). So a child is
// in its owner's shard, and Owns and EnqueueRequestForOwner enqueue the
// owner on the replica that holds it. The hash is KEP-5866's (FNV-1a of
// the UID's bytes), so an owner kept by a journal shard member and by
// this cache lands in the same range.
//
// Where the range applies. The range applies where an object reaches a
// handler (shardfilter.go), for every sharded resource. The files of the
// resources in ShardOptions.Owners journal only the range too
// (feedrange.go): their objects have no controller owner, so their shard
// is their own metadata.uid, which the apiserver's shardSelector
// (ShardedListAndWatch) hashes, or the loop's client-side filter where
// it is not served; Get and List of such a resource read only what this
// replica holds, so a reconcile of a key that moved away answers
// NotFound, which is no deletion. The other sharded resources' files
// journal the whole resource and read whole: an owned child's shard is
// its owner's UID, which no shardSelector can express. Handlers grow into
// a range only once every Owners file has listed it (shardfilter.go), so
// a child's event never enqueues an owner a read cannot find yet.
//
// States of a member's range H (the range its handlers are given), with
// T its share of the live set and O the union of the ranges the other
// live members publish:
//
//	joining  H = ∅ until the Lease is held
//	serving  H ← (H ∩ T) ∪ (T − O) on every renewal: shrink at once,
//	         grow only into what no other live member publishes
//	lost     H = ∅ when the Lease could not be renewed within its duration
//	leaving  Start's context is done: the Lease is deleted, so the others
//	         grow into H at their next renewal
//
// A member publishes H ∪ (every range a handler may still deliver, until
// every handler has applied H), so a range is published by at most one
// member and the growth of one waits for the shrink of another to reach
// its handlers: a key that moves between live members is given to at
// most one replica's handlers at a time, with a gap of up to two
// renewals between the loser's drop and the gainer's OnAdd; a delete in
// that gap is given by the gainer (shardtakeover.go).
//
// What a move looks like to a handler. The losing replica's handlers get
// nothing for a key that leaves: no OnDelete, so no reconcile of a
// deletion. The gaining replica's handlers get OnAdd(obj, false) for
// each stored object of the range that entered, read from the file after
// the events up to then were delivered; the next events of the key follow
// as usual (OnUpdate with the old object the OnAdd showed). An update
// that changes the key an object hashes by (a controller ownerReference
// added or removed) is an OnAdd where the new key is held and nothing
// where only the old one was.
//
// A dead member's range: its Lease expires (LeaseDuration after a
// survivor last saw it renewed), it drops out of the live set and of O,
// and the survivors grow into its range: OnAdd for every stored object
// there, the state as of the takeover, after OnDelete for each object of
// a whole file deleted since the position the dead member last published
// (shardtakeover.go, which also says what no taker can give).
//
// Limits: a request queued before its key left is still reconciled by the
// losing replica (Cache.Holds tells a reconciler whether it holds an
// object now; of an Owners resource, once its file moved, the read
// answers NotFound, which is no deletion); a Watches map function runs on the replica that holds the
// watched object and may enqueue keys another replica holds (they are
// reconciled there, by a replica that does not hold them); an object
// whose controller owner is of an unsharded resource is still cut by its
// owner's UID; Exact's sources do not read a sharded resource yet
// (ErrExactSharded).

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation"
	toolscache "k8s.io/client-go/tools/cache"

	"github.com/watchjournal/watchjournal/shards"
)

// ShardOptions make a cache one member of a shard group (Options.Shard):
// its handlers get only the objects of its hash range of the Resources,
// and the other resources whole (shard.go).
type ShardOptions struct {
	// Group names the shard group: the Leases' label value and name
	// prefix. Required; a DNS label. A cache group must not share its name
	// with a journal shard group (package shards) in the same namespace.
	Group string
	// Member names this replica in the group; a DNS label, unique in the
	// group. Default: shards.DefaultMember() (host name and pid).
	Member string
	// Namespace holds the group's Leases. Default "default".
	Namespace string
	// Resources are the sharded resources (e.g. {Resource: "configmaps"}):
	// their objects reach this replica's handlers only in its range, hashed
	// by their controller owner's UID, else their own. Required.
	Resources []schema.GroupResource
	// Owners are the sharded resources whose objects have no controller
	// owner (a sharded controller's For resource); each must be one of
	// Resources. Their files journal only this replica's range, hashed by
	// the object's own UID: the apiserver sends only the range where it
	// serves shardSelector (feature gate ShardedListAndWatch), the loop
	// drops the rest otherwise. So Get and List of an Owners resource
	// read only the objects this replica holds (shard.go, "Where the
	// range applies"). An object of an Owners resource that has a
	// controller owner reaches the handlers only where its own UID and
	// its owner's both hash into the range. Empty: every file journals
	// its whole resource.
	Owners []schema.GroupResource
	// LeaseDuration is how long a Lease is valid after its last renewal:
	// how long a dead member's range waits before the others take it.
	// Default shards.DefaultLeaseDuration (15 s); at least 1 s.
	LeaseDuration time.Duration
	// RenewInterval is how often the member renews its Lease and follows
	// the group. Default LeaseDuration/3; less than LeaseDuration.
	RenewInterval time.Duration
}

// ErrShardOptions is matched by the error New returns for ShardOptions it
// cannot use (a missing group or resource, a name that is no DNS label,
// durations out of range).
var ErrShardOptions = errors.New("jcache: invalid ShardOptions")

// ErrExactSharded is returned by an ExactSource's Start whose object is
// of a resource the cache shards: Exact's sources read every event of the
// file and do not follow the cache's range.
var ErrExactSharded = errors.New("jcache: exact sources do not support a sharded resource")

// withDefaults checks o and fills its defaults.
func (o ShardOptions) withDefaults() (ShardOptions, error) {
	if o.Member == "" {
		o.Member = shards.DefaultMember()
	}
	if o.Namespace == "" {
		o.Namespace = "default"
	}
	if o.LeaseDuration == 0 {
		o.LeaseDuration = shards.DefaultLeaseDuration
	}
	if o.RenewInterval == 0 {
		o.RenewInterval = o.LeaseDuration / 3
	}
	for _, n := range []struct{ what, v string }{{"Group", o.Group}, {"Member", o.Member}} {
		if errs := validation.IsDNS1123Label(n.v); len(errs) > 0 {
			return o, fmt.Errorf("%w: %s %q: %s", ErrShardOptions, n.what, n.v, strings.Join(errs, "; "))
		}
	}
	if len(o.Resources) == 0 {
		return o, fmt.Errorf("%w: no Resources", ErrShardOptions)
	}
	if o.LeaseDuration < time.Second || o.RenewInterval <= 0 || o.RenewInterval >= o.LeaseDuration {
		return o, fmt.Errorf("%w: LeaseDuration %v, RenewInterval %v: want at least 1s and 0 < RenewInterval < LeaseDuration",
			ErrShardOptions, o.LeaseDuration, o.RenewInterval)
	}
	for _, gr := range o.Owners {
		if !slices.Contains(o.Resources, gr) {
			return o, fmt.Errorf("%w: Owners names %s, which is not one of Resources", ErrShardOptions, gr)
		}
	}
	o.Resources, o.Owners = slices.Clone(o.Resources), slices.Clone(o.Owners)
	return o, nil
}

// sharded reports whether gr is one of the sharded resources.
func (o *ShardOptions) sharded(gr schema.GroupResource) bool {
	return o != nil && slices.Contains(o.Resources, gr)
}

// ranged reports whether gr is one of the Owners: its file journals only
// the range.
func (o *ShardOptions) ranged(gr schema.GroupResource) bool {
	return o != nil && slices.Contains(o.Owners, gr)
}

// shardUID returns the UID obj hashes by: its controller owner's, else its
// own; false when obj has no object metadata (a DeletedFinalStateUnknown
// is unwrapped first).
func shardUID(obj any) (types.UID, bool) {
	if d, ok := obj.(toolscache.DeletedFinalStateUnknown); ok {
		obj = d.Obj
	}
	m, err := meta.Accessor(obj)
	if err != nil {
		return "", false
	}
	if ref := metav1.GetControllerOfNoCopy(m); ref != nil && ref.UID != "" {
		return ref.UID, true
	}
	return m.GetUID(), true
}
