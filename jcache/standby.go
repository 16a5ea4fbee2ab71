package jcache

// Warm standby of Exact under leader election (ExactOptions.Standby).
//
//	ex := jcache.ExactWith(mgr.GetCache(), "mirror", jcache.ExactOptions{
//		Standby: &jcache.Standby{Namespace: "mirror-system", Name: "mirror-position",
//			LeaderElectionID: "mirror-leader"}}) // the manager's Options.LeaderElectionID
//	if err := ex.AddToManager(mgr); err != nil { // publisher (leader), follower (every replica)
//		return err
//	}
//	err := ctrl.NewControllerManagedBy(mgr).Named("mirror").
//		WatchesRawSource(ex.Kind(&v1.Foo{}, &handler.EnqueueRequestForObject{})).
//		Complete(ex.Reconciler(r))
//
// A failover reconciles what changed since the old leader's last publish,
// not every object. Each replica needs its own cache Dir (a volume per
// pod) and the RBAC get, create, update on leases.coordination.k8s.io in
// Standby.Namespace (and get on the leader-election Lease, which the
// manager's leader election has already).
//
// controller-runtime's cache runs on every replica (NeedLeaderElection
// false), so each replica's journal files are already current; only the
// leader runs the controller and so its ExactSources. How the positions
// move across replicas (the publisher on the leader, the follower on
// every replica, where a new leader starts) is jcache/internal/position's
// Standby (see the top of jcache/internal/position/standby.go). What is
// jcache's:
//
//   - One annotation, AnnotationExactPositions, holds every source's
//     position (Standby.Name defaults to "<controller>-position"); the
//     entries of sources that have not started yet are published as
//     read.
//   - A new leader's source creates or commits its consumer where its
//     entry places it. A source with no entry (none published, another
//     resource's, older than the journal's retention) starts from its own
//     consumer when it has one, else replays every object as a first
//     start does; so does a quiet resource whose position has not reached
//     the standby's own list yet (conservative: more, never less).
//   - Publishes are fenced by the leader's term: the leader-election
//     Lease's holderIdentity, leaseTransitions and UID
//     (Standby.LeaderElectionID), read when the publisher starts. A
//     deposed leader's late publish (its final one on stop among them) is
//     refused and logged, its publisher stops, and its successor's
//     positions stand. Over a term of another election Lease (one deleted
//     and created again, whose leaseTransitions start again at 0) the
//     election Lease, read again, decides: no new leader is fenced by an
//     old Lease's term (jcache/internal/position/fence.go).
//   - The follower gets each source's informer from the cache (so a
//     standby's journals exist and follow the watch even before anything
//     else reads them) and creates each source's consumer as it commits.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/manager"

	"github.com/watchjournal/watchjournal/jcache/internal/position"
	"github.com/watchjournal/watchjournal/journal"
)

// AnnotationExactPositions is the annotation of the position Lease of an
// Exact controller with ExactOptions.Standby: a JSON object from consumer
// name ("exact/<controller>/<apiVersion>/<Kind>", see Exact) to
// {"resourceVersion": position, "resource": the journal's resource}.
const AnnotationExactPositions = "watchjournal.io/exact-positions"

// DefaultStandbyInterval is the default Standby.Interval.
const DefaultStandbyInterval = position.DefaultInterval

// ErrStandbyNotAdded is returned by an ExactSource's Start (and so by the
// controller's and the manager's Start) when ExactOptions.Standby is set
// but ExactController.AddToManager was never called: the position would
// never be published nor followed.
var ErrStandbyNotAdded = errors.New("jcache: ExactOptions.Standby is set but ex.AddToManager(mgr) was not called: " +
	"it adds the position publisher (on the leader) and follower (on every replica)")

// ErrStandbyNoElection is returned by an ExactSource's Start (and so by
// the controller's and the manager's Start) when ExactOptions.Standby has
// no LeaderElectionID: without the leader's term, a deposed leader's
// publish could overwrite its successor's positions.
var ErrStandbyNoElection = errors.New("jcache: ExactOptions.Standby.LeaderElectionID is empty: " +
	"set it to the manager's Options.LeaderElectionID, whose term fences the position publishes")

// Standby configures the warm standby of an Exact controller under leader
// election (ExactOptions.Standby). Namespace and LeaderElectionID are
// required.
type Standby struct {
	// Namespace is where the position Lease lives: the operator's own
	// namespace, as for its leader-election Lease.
	Namespace string
	// Name is the position Lease's name. Default "<controller>-position".
	// Two controllers, or two operators, in one namespace with the same
	// name need two names. Never the leader-election Lease's name.
	Name string
	// Identity is written as the Lease's holderIdentity (who published
	// last). Default the host name.
	Identity string
	// Interval is the least time between two publishes while positions
	// move, and the follower's period. Default DefaultStandbyInterval.
	// After a crash of the leader (no graceful stop), the next leader
	// replays at most what was committed in the last Interval, plus what
	// was not committed.
	Interval time.Duration
	// Commits, when above 0, also publishes once the sources' commits
	// have moved Commits times since the last write, before Interval.
	Commits int
	// LeaderElectionID is the name of the manager's leader-election Lease
	// (manager.Options.LeaderElectionID). Required for Exact. When this
	// replica is elected, its publisher reads the Lease's holderIdentity,
	// leaseTransitions and UID, its term, and writes every position under
	// it (the position Lease's annotation watchjournal.io/leader-term): a
	// write under an older term of the same election Lease is refused, and
	// one over a term of another election Lease (deleted and created
	// again) only when the election Lease, read again, is not held under
	// the writer's term; so a deposed leader's late publish cannot
	// overwrite its successor's positions.
	LeaderElectionID string
	// LeaderElectionNamespace is the leader-election Lease's namespace
	// (manager.Options.LeaderElectionNamespace). Default Namespace.
	LeaderElectionNamespace string
}

// newExactStandby returns the standby of the controller e: its sources in
// jcache/internal/position's Standby, whose entries are AnnotationExactPositions.
// The entries of sources that have not started yet are published as the
// first source read them.
func newExactStandby(e *ExactController, so Standby) (*position.Standby, error) {
	sb, err := position.NewStandby(position.Config(so), "jcache", "ExactOptions.Standby", e.name+"-position")
	if err != nil {
		return nil, err
	}
	if so.LeaderElectionID == "" {
		return nil, ErrStandbyNoElection
	}
	sb.NoPosition, sb.Carry = "no position published for this source on Lease ", true
	sb.Codec = position.Codec{
		Encode: func(m map[string]position.Entry) map[string]string {
			b, err := json.Marshal(m) // keys sorted: equal maps, equal text
			if err != nil {
				return nil
			}
			return map[string]string{AnnotationExactPositions: string(b)}
		},
		Decode: func(ann map[string]string) (map[string]position.Entry, error) {
			if ann[AnnotationExactPositions] == "" {
				return nil, nil
			}
			var m map[string]position.Entry
			if err := json.Unmarshal([]byte(ann[AnnotationExactPositions]), &m); err != nil {
				return nil, fmt.Errorf("jcache: annotation %s of Lease %s: %w", AnnotationExactPositions, sb.Lease, err)
			}
			return m, nil
		},
	}
	sb.Sources = func() []position.Source {
		var out []position.Source
		for _, s := range e.sources() {
			s.mu.Lock()
			src := position.Source{Name: s.name, Resource: s.resource, Tracker: &s.tracker, Journal: s.j, Committed: s.Committed}
			if s.started { // wait for the sources that started here
				src.Stopped = s.done
			}
			s.mu.Unlock()
			out = append(out, src)
		}
		return out
	}
	return sb, nil
}

// AddToManager adds to mgr what ExactOptions.Standby needs besides the
// controller: the position publisher (on the leader only) and the
// follower (on every replica; see the top of standby.go). Call it once,
// before mgr.Start. Without ExactOptions.Standby it adds nothing. Its
// RBAC: get, create, update on leases.coordination.k8s.io in
// Standby.Namespace.
func (e *ExactController) AddToManager(mgr manager.Manager) error {
	if e.sb == nil {
		return nil
	}
	if err := e.sb.NewLease(mgr.GetConfig()); err != nil {
		return err
	}
	e.sb.Log = e.log.WithValues("lease", e.sb.Lease.String())
	return e.sb.AddToManager(mgr, e.follow)
}

// sources returns the controller's sources (Kind calls).
func (e *ExactController) sources() []*ExactSource {
	e.mu.Lock()
	defer e.mu.Unlock()
	return append([]*ExactSource(nil), e.srcs...)
}

// follow, the follower Runnable, gets each source's informer, then every
// Interval commits each source that has not started here up to what its
// published position covers.
func (e *ExactController) follow(ctx context.Context) error {
	var fs []*position.Follower
	for _, s := range e.sources() {
		inf, err := s.informer(ctx)
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			e.log.Error(err, "warm standby: the informer of a source could not be got; not following it", "source", s.String())
			continue
		}
		j := inf.f.j
		if err := inf.f.waitForSync(ctx); err != nil {
			return nil // ctx done
		}
		name, res, err := e.consumerName(j, s)
		if err != nil {
			return err
		}
		// A replay hold is left only by a replay this replica ran as
		// leader and did not finish: the follower places the consumer.
		if err := dropReplayHold(j, name); err != nil {
			return err
		}
		fs = append(fs, &position.Follower{Name: name, Resource: res, Journal: j, Mu: &s.mu, Started: &s.started,
			Log: e.log.WithValues("consumer", name)})
	}
	e.sb.Follow(ctx, fs)
	return nil
}

// standbyStart places the published position of the source's consumer
// name in j (see the top of standby.go) and returns the offset to start
// after, and whether the consumer exists now; committed and exists are
// the consumer's before.
func (s *ExactSource) standbyStart(ctx context.Context, j *journal.Journal, name string, committed uint64, exists bool) (uint64, bool, error) {
	s.mu.Lock()
	res := s.resource
	s.mu.Unlock()
	placed := false
	why, err := s.ctl.sb.Start(ctx, s.log, j, &s.tracker, name, res, committed, exists, func(start uint64) error {
		var err error
		if !exists {
			err = j.Consumers().Create(name, start)
		} else if start-1 > committed {
			err = j.Consumers().Commit(name, start-1)
		}
		placed = true
		committed, exists = start-1, true
		return err
	})
	switch {
	case err != nil:
		return 0, false, err
	case placed:
		return committed, exists, nil
	case why == "": // ctx done
	case exists:
		s.log.Info("starting from this replica's own commit", "why", why, "committed", committed)
	default:
		s.log.Info("no published position and no consumer: replaying every object", "why", why)
	}
	return committed, exists, nil
}
