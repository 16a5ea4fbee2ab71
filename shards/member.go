package shards

// Membership (membership.go).
//
// Each member holds one Lease, <group>-<member> in Options.Namespace,
// labelled watchjournal.io/shard-group=<group>, with holderIdentity
// <member>_<random instance id> and leaseDurationSeconds, and renews it
// every RenewInterval (a third of LeaseDuration by default). The live set
// is the group's Leases renewed within leaseDurationSeconds as this
// replica saw it, by its own clock alone (observe.go says how, and what a
// Lease first seen costs). A member that cannot renew before its Lease expires
// stops journaling (StateLost): its loop stops, its file keeps what it
// holds, untouched, until it holds its Lease again. A Lease another
// instance holds and keeps renewing (the same member name started twice)
// is not taken over: the second instance waits (StateJoining).
//
// Assignment.
//
// Every member computes the same split from the same live set:
// hashrange.Assign, rendezvous hashing over 256 buckets, which moves only
// the leaving member's buckets when one leaves and about 1/N of the space
// when one joins (hashrange's package comment says why not an even split).
//
// Handover.
//
// A member's file records the range it holds (journal.Resource.ShardSelector)
// and changes it only through journal.Writer.Reshard, with its loop
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
// published (digest.go, "Takeover"), so what changed in the meantime is journaled
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
// States.
//
//	Joining   → Syncing    the Lease is held (created, or taken after expiry)
//	Syncing   → Serving    the loop synced at the recorded range; it is published
//	Serving   → Resharding the target differs (grow, or a shrink others cover)
//	Resharding→ Syncing    Reshard committed; a new loop runs at the new range
//	any       → Lost       the Lease could not be renewed before it expired
//	Lost      → Syncing    the Lease is held again
//	any       → Leaving    Run's context is done: the others take the range
//	Leaving   → Stopped    they hold it (or LeaveTimeout); the Lease is deleted

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/apimachinery/pkg/util/validation"
	coordclient "k8s.io/client-go/kubernetes/typed/coordination/v1"
	"k8s.io/client-go/rest"

	"github.com/watchjournal/watchjournal/internal/hashrange"
	"github.com/watchjournal/watchjournal/journal"
	"github.com/watchjournal/watchjournal/reconcile"
)

// Lease labels and annotations.
const (
	// LabelGroup labels every Lease of a group with the group's name.
	LabelGroup = "watchjournal.io/shard-group"
	// AnnotationMember is the member's name on its Lease.
	AnnotationMember = "watchjournal.io/shard-member"
	// AnnotationSelector is the range the member's journal holds and is
	// synced with, as a KEP-5866 selector; empty or absent while none is.
	AnnotationSelector = "watchjournal.io/shard-selector"
	// AnnotationLeaving is "true" on the Lease of a member that is
	// stopping: the others take its range as if it had left, and it keeps
	// journaling until they hold it (member.go, "Handover").
	AnnotationLeaving = "watchjournal.io/shard-leaving"
	// AnnotationIndex is the manifest of the index the member publishes
	// (digest.go): JSON {"range", "head", "keys", "chunks"}, the chunks
	// being the names of Leases labelled LabelIndexOf.
	AnnotationIndex = "watchjournal.io/shard-index"
	// LabelIndexOf labels the Leases that hold a member's published index
	// (its chunks) with the member's name; LabelIndexGroup with the
	// group's.
	LabelIndexOf    = "watchjournal.io/shard-index-of"
	LabelIndexGroup = "watchjournal.io/shard-index-group"
	// AnnotationIndexData holds a chunk of an index: base64 of gzip'd
	// lines "<key> <uid> <resourceVersion>\n", sorted by key.
	AnnotationIndexData = "watchjournal.io/shard-index-data"
)

// Defaults of Options.
const (
	DefaultLeaseDuration = 15 * time.Second
	DefaultLeaveTimeout  = 30 * time.Second
)

// State is a member's state (member.go, "States").
type State string

// States.
const (
	StateJoining    State = "Joining"
	StateSyncing    State = "Syncing"
	StateServing    State = "Serving"
	StateResharding State = "Resharding"
	StateLost       State = "Lost"
	StateLeaving    State = "Leaving"
	StateStopped    State = "Stopped"
)

// ErrLeaseHeld is the Status.LastError of a member whose Lease another
// instance holds and renews (the same member name in two processes).
var ErrLeaseHeld = errors.New("shards: the member's Lease is held by another instance")

// Options configure Open.
type Options struct {
	// Group names the shard group: the Leases' label value and name
	// prefix. Required; a DNS label (lowercase letters, digits, '-').
	Group string
	// Member names this replica in the group, stable across its restarts
	// so that it finds its file's range again; a DNS label. Default:
	// DefaultMember() (host name and pid: a new member after each restart).
	Member string
	// Namespace holds the group's Leases. Default: the resource's
	// namespace, else "default".
	Namespace string
	// LeaseDuration is how long a Lease is valid after its last renewal:
	// how long a dead member's range waits before the others take it.
	// Default 15 s; at least 1 s (leaseDurationSeconds is whole seconds).
	LeaseDuration time.Duration
	// RenewInterval is how often the member renews its Lease and looks at
	// the group. Default LeaseDuration/3.
	RenewInterval time.Duration
	// LeaveTimeout bounds how long Run, once its context is done, keeps
	// journaling while the others take the member's range (member.go,
	// "Handover"). Default 30 s; negative: none, the member stops at once;
	// with other members live it publishes its index and leaves its Lease
	// to expire, so that they take the range over with the index a Lease
	// duration later (digest.go, "Takeover"); alone, or without an index
	// (IndexInterval negative), it deletes the Lease.
	LeaveTimeout time.Duration
	// IndexInterval is how often, at most, the member republishes its
	// index (keys, UIDs, resourceVersions) when its journal moved, for
	// whoever takes its range over if it dies (digest.go, "Takeover"): the
	// longer, the more of what it journaled last is journaled again by
	// the new owner. A publication also waits ten times as long as the
	// last one took (a large index). Default RenewInterval; negative: never
	// published, and a dead member's deletes in the gap are lost.
	IndexInterval time.Duration
	// Buckets is how many buckets the hash space is cut into for the
	// rendezvous hashing that assigns them (0: 256; member.go,
	// "Assignment"). Every member of a group must use the same.
	Buckets int
	// Loop configures each reconcile loop the member runs.
	Loop reconcile.Options
	// Journal configures journal.Open; its Resource is ignored.
	Journal journal.Options
	// Logger receives the member's state changes at V(0); the zero Logger
	// discards.
	Logger logr.Logger
}

// DefaultMember returns the host name and pid as a DNS label, e.g.
// "node-1-4242".
func DefaultMember() string {
	h, _ := os.Hostname()
	return dnsLabel(fmt.Sprintf("%s-%d", h, os.Getpid()))
}

func dnsLabel(s string) string {
	b := []byte(strings.ToLower(s))
	for i, c := range b {
		if (c < 'a' || c > 'z') && (c < '0' || c > '9') {
			b[i] = '-'
		}
	}
	s = strings.Trim(string(b), "-")
	if len(s) > 63 {
		s = strings.Trim(s[len(s)-63:], "-")
	}
	return s
}

func (o Options) withDefaults(res journal.Resource) Options {
	if o.Member == "" {
		o.Member = DefaultMember()
	}
	o.Namespace = cmp.Or(o.Namespace, res.Namespace, "default")
	o.LeaseDuration = cmp.Or(o.LeaseDuration, DefaultLeaseDuration)
	o.RenewInterval = cmp.Or(o.RenewInterval, o.LeaseDuration/3)
	o.IndexInterval = cmp.Or(o.IndexInterval, o.RenewInterval)
	o.Buckets = cmp.Or(o.Buckets, hashrange.DefaultBuckets)
	o.LeaveTimeout = cmp.Or(o.LeaveTimeout, DefaultLeaveTimeout)
	return o
}

// status is Status with the ranges as Sets (their fields shadow Status's).
type status struct {
	Status
	Range, Target, Published hashrange.Set
}

// Status is a member's state as last seen.
type Status struct {
	State  State
	Member string
	// Members is the live set last seen, sorted, this member included.
	Members []string
	// Range is the range the file records; Target the member's share of
	// the live set. Both are KEP-5866 shardSelectors (shardRange terms of
	// object.metadata.uid joined by ||, as AnnotationSelector carries
	// them), canonical: two that select the same hashes are equal.
	Range, Target string
	// Published is the range announced on the Lease ("": none).
	Published string
	// Reshards counts range changes; MovedOut the keys they journaled as
	// DELETED (moved).
	Reshards, MovedOut int
	// LastError is the last failure of a Lease request or a range change,
	// nil after a success.
	LastError error
}

// Member is one replica of a shard group: it holds its Lease, journals its
// share of the resource into its file, and follows the group (doc.go).
// Open it, Run it, Close it after Run returns.
type Member struct {
	cfg  *rest.Config
	res  journal.Resource
	opts Options
	log  logr.Logger
	j    *journal.Journal
	// The member's Lease (membership.go), and its name, with which the
	// index's chunks are named; leases is the Lease client it uses, for
	// the chunks (digest.go).
	ms     *Membership
	lease  string
	leases coordclient.LeaseInterface

	mu       sync.Mutex
	st       status
	loop     *reconcile.Loop
	stopLoop func()
	leaving  bool // set once Run's context is done (leave)
	// The index last published (digest.go) and when; the dead members and
	// the ranges of the live ones as view last saw them.
	index     *manifest
	indexAt   time.Time
	indexTook time.Duration // how long the last publication took
	gone      []dead
	held      map[string]hashrange.Set
	// unreadable maps each live member whose selector did not parse at
	// the last view to that selector (logged once per selector).
	unreadable map[string]string

	wake  chan struct{} // a loop synced
	fatal chan error    // a loop's Run failed
}

// Open opens (creating as needed) the member's journal file at path for
// res, whose ShardSelector must be empty: the member sets it. A new file
// records the whole space until the member takes its share; an existing
// one must record res with a shard range (journal.ErrResourceMismatch
// otherwise: another resource, or a file that is not a shard member's).
// Errors also come from journal.Open and from a name that is no DNS label.
func Open(cfg *rest.Config, path string, res journal.Resource, opts Options) (*Member, error) {
	opts = opts.withDefaults(res)
	for _, n := range []struct{ what, v string }{{"group", opts.Group}, {"member", opts.Member}} {
		if errs := validation.IsDNS1123Label(n.v); len(errs) > 0 {
			return nil, fmt.Errorf("shards: %s %q: %s", n.what, n.v, strings.Join(errs, "; "))
		}
	}
	if res.ShardSelector != "" {
		return nil, errors.New("shards: Open: res.ShardSelector must be empty: the member sets it")
	}
	if opts.LeaseDuration < time.Second || opts.RenewInterval <= 0 || opts.RenewInterval >= opts.LeaseDuration {
		return nil, fmt.Errorf("shards: LeaseDuration %v, RenewInterval %v: want at least 1s and 0 < RenewInterval < LeaseDuration", opts.LeaseDuration, opts.RenewInterval)
	}
	jopts := opts.Journal
	jopts.Resource = nil
	j, err := journal.Open(path, &jopts)
	if err != nil {
		return nil, err
	}
	rec, ok, err := j.Resource()
	_ = j.Close()
	if err != nil {
		return nil, err
	}
	want := res
	switch {
	case !ok:
		want.ShardSelector = hashrange.Full().Selector()
	case rec.ShardSelector == "":
		return nil, fmt.Errorf("shards: %s: %w: the file is not sharded (%s)", path, journal.ErrResourceMismatch, rec)
	default:
		want.ShardSelector = rec.ShardSelector
	}
	jopts.Resource = &want
	if j, err = journal.Open(path, &jopts); err != nil {
		return nil, err
	}
	ms, err := NewMembership(cfg, MembershipOptions{Group: opts.Group, Member: opts.Member, Namespace: opts.Namespace,
		LeaseDuration: opts.LeaseDuration, RenewInterval: opts.RenewInterval})
	if err != nil {
		_ = j.Close()
		return nil, err
	}
	m := &Member{
		cfg: cfg, res: res, opts: opts, j: j,
		log:    opts.Logger.WithValues("group", opts.Group, "member", opts.Member),
		ms:     ms,
		lease:  ms.lease,
		leases: ms.leases,
		wake:   make(chan struct{}, 1),
		fatal:  make(chan error, 1),
	}
	m.st = status{Status: Status{State: StateJoining, Member: opts.Member}}
	if m.st.Range, err = m.recorded(); err != nil {
		_ = j.Close()
		return nil, err
	}
	return m, nil
}

// Journal returns the member's journal, for consumers (Consumer, Read,
// Wait) and for inspect.Serve.
func (m *Member) Journal() *journal.Journal { return m.j }

// Status returns the member's state.
func (m *Member) Status() Status {
	m.mu.Lock()
	defer m.mu.Unlock()
	st := m.st.Status
	st.Members = slices.Clone(st.Members)
	st.Range, st.Target, st.Published = m.st.Range.Selector(), m.st.Target.Selector(), m.st.Published.Selector()
	return st
}

// Close closes the journal; call it after Run has returned.
func (m *Member) Close() error { return m.j.Close() }

// recorded returns the range the file records.
func (m *Member) recorded() (hashrange.Set, error) {
	rec, _, err := m.j.Resource()
	if err != nil {
		return nil, err
	}
	return hashrange.Selected(rec.ShardSelector)
}

func (m *Member) set(fn func(*status)) {
	m.mu.Lock()
	defer m.mu.Unlock()
	before := m.st.State
	fn(&m.st)
	if m.st.State != before {
		m.log.Info("shard member state", "from", string(before), "to", string(m.st.State),
			"range", fmt.Sprintf("%.1f%%", 100*m.st.Range.Share()), "members", len(m.st.Members))
	}
}

// Run takes part in the group until ctx is done: it renews the member's
// Lease every RenewInterval, follows the live set, changes the file's
// range (member.go, "Handover") and runs the reconcile loop of the current
// range. Once ctx is done it leaves: it marks its Lease leaving and keeps
// journaling until the other live members publish ranges that cover its
// own, or LeaveTimeout passes; then it stops the loop, deletes the Lease
// and returns nil. It returns early only with a loop's fatal error
// (reconcile.ErrJournal, ErrRejected). Run is called once.
func (m *Member) Run(ctx context.Context) error {
	defer func() {
		m.halt()
		m.release()
		m.set(func(s *status) { s.State = StateStopped; s.Published = nil })
	}()
	t := time.NewTimer(0)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			m.leave()
			return nil
		case err := <-m.fatal:
			return err
		case <-t.C:
			t.Reset(m.opts.RenewInterval)
		case <-m.wake:
		}
		if err := m.tick(ctx); err != nil {
			return err
		}
	}
}

// tick renews the Lease, reads the group and moves toward the target.
func (m *Member) tick(ctx context.Context) error {
	now := time.Now()
	if err := m.renew(ctx, now); err != nil {
		m.set(func(s *status) { s.LastError = err })
		if ctx.Err() != nil {
			return nil
		}
		expired := m.ms.Lapsed(now)
		m.mu.Lock()
		state := m.st.State
		m.mu.Unlock()
		if expired && state != StateJoining && state != StateLost {
			m.log.Info("lost the Lease: stopping the journal's loop", "error", err.Error())
			m.halt()
			m.set(func(s *status) { s.State = StateLost; s.Published = nil })
		}
		return nil
	}
	live, held, err := m.view(ctx, now)
	if err != nil {
		m.set(func(s *status) { s.LastError = err })
		return nil
	}
	target := hashrange.Assign(live, m.opts.Buckets)[m.opts.Member]
	cur, err := m.recorded()
	if err != nil {
		return fmt.Errorf("shards: %w", err)
	}
	m.set(func(s *status) { s.Members, s.Target, s.Range, s.LastError = live, target, cur, nil })
	fresh, err := m.fresh()
	if err != nil {
		return fmt.Errorf("shards: %w", err)
	}
	others := m.othersHeld(held) // what other live members hold, synced
	m.mu.Lock()
	joining := m.loop == nil && (m.st.State == StateJoining || m.st.State == StateLost)
	m.mu.Unlock()
	if taken := cur.Intersect(others); joining && !fresh && !taken.Empty() {
		// Back after others took (part of) the file's range over while it
		// journaled nothing: what the file holds there, they journaled
		// since; it moves out now and comes back with the next list
		// (digest.go, "Takeover").
		keep := cur.Minus(taken)
		if keep.Empty() {
			keep = noKeys
		}
		m.log.Info("others took the range over while this member was away: handing their part back before listing it",
			"taken", fmt.Sprintf("%.1f%%", 100*taken.Share()))
		if err := m.reshard(keep); err != nil {
			return err
		}
		cur = keep
	}
	if next := nextRange(cur, target, others, fresh); next != nil {
		if err := m.reshard(next); err != nil {
			return err
		}
		if in := next.Intersect(others.Union(m.goneHeld())); fresh && !in.Empty() {
			// An empty file joining a running group: what it lists there,
			// others hold, or held when they died: it moves in (from a
			// dead member, with its index: start).
			if err := m.j.Writer().MarkShardPending(in.Selector()); err != nil {
				return fmt.Errorf("shards: %w", err)
			}
		}
	}
	m.mu.Lock()
	running := m.loop != nil
	m.mu.Unlock()
	if !running {
		if err := m.start(ctx); err != nil {
			m.set(func(s *status) { s.LastError = err })
			return nil
		}
	}
	return m.publish(ctx, now)
}

// othersHeld returns the union of the ranges in held (by member) of the
// members other than this one.
func (m *Member) othersHeld(held map[string]hashrange.Set) hashrange.Set {
	var others hashrange.Set
	for name, sel := range held {
		if name != m.opts.Member {
			others = others.Union(sel)
		}
	}
	return others
}

// noKeys is the first hash alone, the smallest range a file can record: no
// UID hashes to it in practice (probability 2^-64). A member whose whole
// range was taken over while it was away drops to it (tick).
var noKeys = hashrange.Set{{First: 0, Last: 0}}

// nextRange returns the range a member whose file holds cur moves to
// next, nil to stay (member.go, "Handover"): an empty (fresh) file takes its
// target at once; otherwise it grows first, to cur ∪ target, and shrinks
// only the part of cur outside target that others (the union of the other
// live members' published ranges) hold, never to nothing.
func nextRange(cur, target, others hashrange.Set, fresh bool) hashrange.Set {
	switch grow := target.Minus(cur); {
	case fresh && !target.Empty() && !cur.Equal(target):
		return target
	case !grow.Empty():
		return cur.Union(target)
	}
	if drop := cur.Minus(target).Intersect(others); !drop.Empty() && !cur.Minus(drop).Empty() {
		return cur.Minus(drop)
	}
	return nil
}

// fresh reports whether the file holds nothing yet: no key, no
// resourceVersion, nothing pending.
func (m *Member) fresh() (bool, error) {
	rv, err := m.j.ResourceVersion()
	if err != nil || rv != "" {
		return false, err
	}
	keys, err := m.j.ScanIndex("", 1)
	if err != nil || len(keys) > 0 {
		return false, err
	}
	p, err := m.j.Writer().ShardPending()
	return p == "", err
}

// reshard stops the loop and binds the file to next; the caller starts a
// new loop.
func (m *Member) reshard(next hashrange.Set) error {
	m.set(func(s *status) { s.State = StateResharding; s.Published = nil })
	m.halt()
	r, err := m.j.Writer().Reshard(next.Selector())
	if err != nil {
		return fmt.Errorf("shards: %w", err)
	}
	entered, _ := hashrange.ParseOrEmpty(r.Entered) // for the log: a selector the journal wrote in canonical form
	m.log.Info("range changed", "share", fmt.Sprintf("%.1f%%", 100*next.Share()), "ranges", len(next),
		"left", r.Left, "entered", fmt.Sprintf("%.1f%%", 100*entered.Share()))
	m.set(func(s *status) { s.Range = next; s.Reshards++; s.MovedOut += r.Left })
	return nil
}

// start runs a new reconcile loop at the recorded range, with the index
// of the dead members whose range it takes over (digest.go).
func (m *Member) start(ctx context.Context) error {
	inh, err := m.inheritance(ctx, m.gone, m.othersHeld(m.held)) // digest.go
	if err != nil {
		return err
	}
	lopts := m.opts.Loop
	lopts.Inherited = inh
	l, err := reconcile.New(m.cfg, m.j, lopts)
	if err != nil {
		return err
	}
	lctx, cancel := context.WithCancel(ctx)
	var run sync.WaitGroup
	run.Go(func() { // ends when lctx is done (halt) or on a fatal error
		if err := l.Run(lctx); err != nil {
			select {
			case m.fatal <- err:
			default:
			}
		}
	})
	go func() { // ends when the loop syncs or lctx is done
		if l.WaitForSync(lctx) == nil {
			select {
			case m.wake <- struct{}{}:
			default:
			}
		}
	}()
	m.mu.Lock()
	m.loop, m.stopLoop = l, func() { cancel(); run.Wait() }
	m.mu.Unlock()
	m.set(func(s *status) { s.State = StateSyncing })
	return nil
}

// halt stops the loop, if one runs, and waits for it.
func (m *Member) halt() {
	m.mu.Lock()
	stop := m.stopLoop
	m.loop, m.stopLoop = nil, nil
	m.mu.Unlock()
	if stop != nil {
		stop()
	}
}

// publish announces the recorded range on the Lease once the loop has
// synced at it, and forgets what was pending (its list has committed);
// then it republishes the index if the journal moved, and deletes the
// Leases and indexes of dead members whose ranges the live ones hold
// (digest.go).
func (m *Member) publish(ctx context.Context, now time.Time) error {
	m.mu.Lock()
	l, cur, pub := m.loop, m.st.Range, m.st.Published
	m.mu.Unlock()
	if l == nil || !l.HasSynced() {
		return nil
	}
	if p, err := m.j.Writer().ShardPending(); err == nil && p != "" {
		if err := m.j.Writer().ClearShardPending(); err != nil {
			return fmt.Errorf("shards: %w", err)
		}
	}
	m.set(func(s *status) { s.State = StateServing })
	if !pub.Equal(cur) {
		m.set(func(s *status) { s.Published = cur })
		if err := m.renew(ctx, now); err != nil {
			m.set(func(s *status) { s.LastError = err })
			return nil
		}
	}
	if err := m.publishIndex(ctx, cur); err != nil { // digest.go
		m.set(func(s *status) { s.LastError = err })
	}
	m.collect(ctx, m.gone, m.held)
	return nil
}

// renew creates, takes over (when expired) or renews the member's Lease,
// with the published range, the index and the leaving mark.
func (m *Member) renew(ctx context.Context, now time.Time) error {
	m.mu.Lock()
	pub := m.st.Published
	m.mu.Unlock()
	created, err := m.ms.Renew(ctx, now, Announcement{Selector: pub.Selector(), Leaving: m.leaving, Index: m.index.encode()})
	if created {
		// Its chunks may have gone with it (a dead member's, collected):
		// the next publication writes them all again.
		m.index = nil
	}
	if err != nil {
		return err
	}
	m.mu.Lock()
	if m.st.State == StateLost {
		m.log.Info("holding the Lease again")
	}
	m.mu.Unlock()
	return nil
}

// requestTimeout bounds one request about the index's Leases as one
// about the member's (Membership.Renew).
func (m *Member) requestTimeout() time.Duration { return m.ms.requestTimeout() }

// view lists the group's Leases and returns the live members, sorted (this
// one included), and the range each live member publishes; it keeps the
// Leases of the members that are not live (m.gone) for takeovers
// (digest.go).
func (m *Member) view(ctx context.Context, now time.Time) ([]string, map[string]hashrange.Set, error) {
	v, err := m.ms.View(ctx, now)
	if err != nil {
		return nil, nil, err
	}
	held := map[string]hashrange.Set{}
	unreadable := map[string]string{}
	for name, sel := range v.Selectors {
		s, err := hashrange.Parse(sel)
		if err != nil {
			// Left out of held: this member then shrinks out of none of
			// it (nextRange drops only what others publish), so no key
			// is left unjournaled for it.
			unreadable[name] = sel
			if m.unreadable[name] != sel {
				m.log.Error(err, "the shard selector of a live member's Lease does not parse: this member drops none of its range for it",
					"peer", name, "selector", sel)
			}
			continue
		}
		held[name] = s
	}
	m.unreadable = unreadable
	var gone []dead
	for _, l := range v.Gone {
		gone = append(gone, dead{member: l.Annotations[AnnotationMember], lease: l, index: manifestOf(l)})
	}
	m.gone, m.held = gone, held
	return v.Live, held, nil
}

// leave hands the member's range over before Run returns: it marks the
// Lease leaving and keeps the loop running until the other live members
// publish ranges that cover the member's, there are no others, or
// LeaveTimeout passes.
func (m *Member) leave() {
	m.mu.Lock()
	running, cur := m.loop != nil, m.st.Range
	m.mu.Unlock()
	if !running || !m.ms.holding() || m.opts.LeaveTimeout < 0 {
		return
	}
	m.leaving = true
	m.set(func(s *status) { s.State = StateLeaving })
	ctx, cancel := context.WithTimeout(context.Background(), m.opts.LeaveTimeout)
	defer cancel()
	for {
		now := time.Now()
		if err := m.renew(ctx, now); err == nil {
			live, held, err := m.view(ctx, now)
			if err == nil {
				if len(live) == 1 || m.othersHeld(held).Covers(cur) {
					m.log.Info("left the group: the others hold the range", "others", len(live)-1)
					return
				}
			}
		}
		select {
		case <-ctx.Done():
			m.log.Info("leaving: the others did not take the range within LeaveTimeout; stopping anyway", "timeout", m.opts.LeaveTimeout)
			return
		case err := <-m.fatal:
			m.log.Error(err, "leaving: the loop failed")
			return
		case <-time.After(m.opts.RenewInterval):
		}
	}
}

// release deletes the member's Lease if it still holds it, so that the
// others take its range at their next renewal. It reads the Lease first:
// the last renewal may have landed although its answer did not. With
// LeaveTimeout negative and other members live, it keeps the Lease and
// publishes the index once more, final now that the loop has stopped
// (Options.LeaveTimeout).
func (m *Member) release() {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	m.mu.Lock()
	pub, members := m.st.Published, len(m.st.Members)
	m.mu.Unlock()
	if m.opts.LeaveTimeout < 0 && m.opts.IndexInterval >= 0 && !pub.Empty() && members > 1 {
		m.indexAt = time.Time{}
		err := m.publishIndex(ctx, pub)
		if err == nil {
			m.log.Info("stopped without handover: the Lease expires and the others take the range over with the index", "head", m.index.Head)
			return
		}
		m.log.Info("could not publish the final index: deleting the Lease", "error", err.Error())
	}
	if err := m.ms.Release(ctx); errors.Is(err, ErrLeaseHeld) {
		return // another instance holds it now
	} else if err != nil {
		m.log.Info("could not delete the Lease; it expires on its own", "error", err.Error())
		return
	}
	// The Lease is gone, and its index with it (digest.go).
	if err := m.deleteChunks(ctx, m.opts.Member, nil); err != nil {
		m.log.Info("could not delete the index", "error", err.Error())
	}
}

// goneHeld returns the union of the ranges the dead members' indexes hold.
func (m *Member) goneHeld() hashrange.Set {
	var out hashrange.Set
	for _, d := range m.gone {
		if d.index == nil {
			continue
		}
		if s, err := hashrange.Parse(d.index.Range); err == nil {
			out = out.Union(s)
		}
	}
	return out
}
