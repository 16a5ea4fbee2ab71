package jcache

// Warm standby of Exact under leader election (ExactOptions.Standby).
//
//	ex := jcache.ExactWith(mgr.GetCache(), "mirror", jcache.ExactOptions{
//		Standby: &jcache.Standby{Namespace: "mirror-system", Name: "mirror-position"}})
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
// Standby.Namespace.
//
// controller-runtime's cache runs on every replica (NeedLeaderElection
// false), so each replica's journal files are already current; only the
// leader runs the controller and so its ExactSources. What has to move
// across replicas is the position, as a resourceVersion per source
// (internal/position, shared with crsource):
//
//   - The leader's publisher (ExactController.AddToManager; a
//     leader-election Runnable) writes, on a Lease of its own
//     (Standby.Name, default "<controller>-position"; never the
//     leader-election Lease), one annotation, AnnotationExactPositions: a
//     JSON object from each source's consumer name to its position (the
//     resourceVersion up to which its events are reconciled) and the
//     resource the position belongs to. At most every Standby.Interval
//     while positions move, and once more on a graceful stop, after the
//     sources' final commits (the manager stops leader-election Runnables
//     before it releases the election Lease).
//   - A new leader's ExactSource places its entry in its own journal
//     (position.StartFor) and starts its consumer right after the last
//     event the position covers, or after its own commit when that is
//     later. A source with no entry (none published, another resource's,
//     older than the journal's retention) starts from its own consumer
//     when it has one, else replays every object as a first start does;
//     so does a quiet resource whose position has not reached the
//     standby's own list yet (conservative: more, never less). After a
//     crash (no final publish) the next leader also reconciles what was
//     committed in the last Interval.
//   - The follower (a Runnable on every replica) gets each source's
//     informer from the cache (so a standby's journals exist and follow
//     the watch even before anything else reads them) and commits each
//     source's consumer behind the published position (creating it), so
//     a standby's consumers do not hold retention back and a failover
//     starts from them; it stops touching a source once it started here.
//
// States of a replica: standby (cache, follower) → leader (cache,
// sources, publisher) → stopped; controller-runtime ends the process
// when leadership is lost.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	"github.com/watchjournal/watchjournal/internal/position"
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

// Standby configures a warm standby under leader election: of an Exact
// controller (ExactOptions.Standby) and of a crsource.Source
// (crsource.Options.Standby, the same type). Namespace is required.
type Standby struct {
	// Namespace is where the position Lease lives: the operator's own
	// namespace, as for its leader-election Lease.
	Namespace string
	// Name is the position Lease's name. Default "<controller>-position"
	// for Exact, "<consumer>-position" for crsource. Two controllers, or
	// two operators, in one namespace with the same name need two names.
	// Never the leader-election Lease's name.
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
}

// exactPosition is one source's entry in AnnotationExactPositions.
type exactPosition struct {
	ResourceVersion string `json:"resourceVersion"`
	Resource        string `json:"resource"`
}

// exactStandby is the standby state of an ExactController.
type exactStandby struct {
	opts   Standby
	signal *position.Signal
	lease  *position.Lease // set by AddToManager
	added  bool

	// read is what a new leader's first source read from the Lease: the
	// entries of sources that have not started yet are published as read.
	read map[string]exactPosition
}

func newExactStandby(controller string, so Standby) (*exactStandby, error) {
	if so.Namespace == "" {
		return nil, errors.New("jcache: ExactOptions.Standby.Namespace is empty")
	}
	if so.Name == "" {
		so.Name = controller + "-position"
	}
	if so.Identity == "" {
		so.Identity, _ = os.Hostname()
	}
	if so.Interval <= 0 {
		so.Interval = DefaultStandbyInterval
	}
	return &exactStandby{opts: so, signal: position.NewSignal()}, nil
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
	cs, err := kubernetes.NewForConfig(mgr.GetConfig())
	if err != nil {
		return fmt.Errorf("jcache: %w", err)
	}
	so := e.sb.opts
	e.sb.lease = &position.Lease{Client: cs.CoordinationV1().Leases(so.Namespace), Namespace: so.Namespace, Name: so.Name, Identity: so.Identity}
	if err := mgr.Add(exactPublisher{e}); err != nil {
		return err
	}
	if err := mgr.Add(exactFollower{e}); err != nil {
		return err
	}
	e.mu.Lock()
	e.sb.added = true
	e.mu.Unlock()
	return nil
}

// sources returns the controller's sources (Kind calls).
func (e *ExactController) sources() []*ExactSource {
	e.mu.Lock()
	defer e.mu.Unlock()
	return append([]*ExactSource(nil), e.srcs...)
}

// positions returns the entries to publish: as read at start, overlaid
// with every source's current position.
func (e *ExactController) positions() map[string]exactPosition {
	out := map[string]exactPosition{}
	e.mu.Lock()
	for k, v := range e.sb.read {
		out[k] = v
	}
	e.mu.Unlock()
	for _, s := range e.sources() {
		s.mu.Lock()
		name, res := s.name, s.resource
		s.mu.Unlock()
		if pos := s.tracker.Position(); name != "" && res != "" && pos != "" {
			out[name] = exactPosition{ResourceVersion: pos, Resource: res}
		}
	}
	return out
}

// readPositions reads the Lease's entries; nil when there is no Lease or
// no annotation, an error when the annotation does not parse.
func (sb *exactStandby) readPositions(ctx context.Context) (map[string]exactPosition, error) {
	ann, ok, err := sb.lease.Get(ctx)
	if err != nil || !ok || ann[AnnotationExactPositions] == "" {
		return nil, err
	}
	var m map[string]exactPosition
	if err := json.Unmarshal([]byte(ann[AnnotationExactPositions]), &m); err != nil {
		return nil, fmt.Errorf("jcache: annotation %s of Lease %s: %w", AnnotationExactPositions, sb.lease, err)
	}
	return m, nil
}

// exactPublisher publishes the leader's positions.
type exactPublisher struct{ e *ExactController }

// NeedLeaderElection returns true: only the leader publishes.
func (exactPublisher) NeedLeaderElection() bool { return true }

// Start publishes until ctx is done, then once more after the sources'
// final commits (position.Publisher).
func (p exactPublisher) Start(ctx context.Context) error {
	e := p.e
	pub := &position.Publisher{Lease: e.sb.lease, Signal: e.sb.signal, Interval: e.sb.opts.Interval, Commits: e.sb.opts.Commits,
		Log: e.log.WithValues("lease", e.sb.lease.String()),
		Annotations: func() map[string]string {
			m := e.positions()
			if len(m) == 0 {
				return nil
			}
			b, err := json.Marshal(m) // keys sorted: equal maps, equal text
			if err != nil {
				return nil
			}
			return map[string]string{AnnotationExactPositions: string(b)}
		},
		Refresh: func() {
			for _, s := range e.sources() {
				if j := s.Journal(); j != nil {
					if c, err := s.Committed(); err == nil && c > 0 {
						s.tracker.Note(j, c)
					}
				}
			}
		},
		Stopped: func(ctx context.Context) {
			for _, s := range e.sources() {
				s.mu.Lock()
				started := s.started
				s.mu.Unlock()
				if !started {
					continue
				}
				select {
				case <-s.done:
				case <-ctx.Done():
					return
				}
			}
		},
	}
	return pub.Run(ctx)
}

// exactFollower follows the published positions on every replica.
type exactFollower struct{ e *ExactController }

// NeedLeaderElection returns false: it runs on standbys (and on the
// leader until its sources start).
func (exactFollower) NeedLeaderElection() bool { return false }

// Start gets each source's informer, then every Interval commits each
// source that has not started here up to what its published position
// covers.
func (f exactFollower) Start(ctx context.Context) error {
	e := f.e
	type follow struct {
		s    *ExactSource
		name string
		res  string
		f    *position.Follower
	}
	var fs []follow
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
		if err := inf.f.loop.WaitForSync(ctx); err != nil {
			return nil // ctx done
		}
		name, err := e.consumerName(j, s)
		if err != nil {
			return err
		}
		r, _, err := j.Resource()
		if err != nil {
			return err
		}
		fs = append(fs, follow{s: s, name: name, res: position.Resource(r), f: &position.Follower{Journal: j, Log: e.log.WithValues("consumer", name),
			Committed: func() (uint64, error) {
				c, err := j.ConsumerCommitted(name)
				if errors.Is(err, journal.ErrNoConsumer) {
					return 0, nil
				}
				return c, err
			},
			Commit: func(p uint64) error {
				s.mu.Lock()
				defer s.mu.Unlock()
				if s.started {
					return nil
				}
				err := j.CommitConsumer(name, p)
				if errors.Is(err, journal.ErrNoConsumer) {
					err = j.CreateConsumer(name, p+1)
				}
				return err
			}}})
	}
	position.Follow(ctx, e.sb.lease, e.sb.opts.Interval, func(ann map[string]string) bool {
		var m map[string]exactPosition
		if err := json.Unmarshal([]byte(ann[AnnotationExactPositions]), &m); err != nil {
			return true
		}
		waiting := false
		for _, x := range fs {
			x.s.mu.Lock()
			started := x.s.started
			x.s.mu.Unlock()
			if started {
				continue
			}
			waiting = true
			if p, ok := m[x.name]; ok && p.Resource == x.res {
				x.f.Step(p.ResourceVersion)
			}
		}
		return waiting
	})
	return nil
}

// standbyStart places the published position of the source's consumer
// name in j (see the top of standby.go) and returns the offset to start
// after, and whether the consumer exists now; committed and exists are
// the consumer's before.
func (s *ExactSource) standbyStart(ctx context.Context, j *journal.Journal, name string, committed uint64, exists bool) (uint64, bool, error) {
	e, sb := s.ctl, s.ctl.sb
	var m map[string]exactPosition
	for {
		var err error
		m, err = sb.readPositions(ctx)
		if err == nil {
			break
		}
		if apierrors.IsForbidden(err) || apierrors.IsUnauthorized(err) {
			return 0, false, fmt.Errorf("jcache: reading the position Lease %s (RBAC: get, create, update on leases.coordination.k8s.io in %s): %w",
				sb.lease, sb.opts.Namespace, err)
		}
		s.log.Error(err, "reading the position Lease failed; retrying", "lease", sb.lease.String())
		select {
		case <-ctx.Done():
			return committed, exists, nil
		case <-time.After(time.Second):
		}
	}
	e.mu.Lock()
	if sb.read == nil {
		sb.read = m
	}
	e.mu.Unlock()
	s.mu.Lock()
	res := s.resource
	s.mu.Unlock()
	p, found := m[name]
	var why string
	switch {
	case !found || p.ResourceVersion == "":
		why = "no position published for this source on Lease " + sb.lease.String()
	case p.Resource != res:
		why = fmt.Sprintf("the position on Lease %s is for another resource (%s, not %s)", sb.lease, p.Resource, res)
	default:
		start, how, ok, err := position.StartFor(j, p.ResourceVersion, 0)
		if err != nil {
			return 0, false, fmt.Errorf("jcache: placing the position %s: %w", p.ResourceVersion, err)
		}
		if !ok {
			why = how
			break
		}
		if exists && committed+1 > start {
			start, how = committed+1, "this replica's own commit is later: "+how
		}
		s.tracker.Set(p.ResourceVersion) // publishes never go below where this leader starts
		if !exists {
			err = j.CreateConsumer(name, start)
		} else if start-1 > committed {
			err = j.CommitConsumer(name, start-1)
		}
		if err != nil {
			return 0, false, err
		}
		s.log.Info("starting from the published position", "resourceVersion", p.ResourceVersion, "offset", start, "how", how)
		return start - 1, true, nil
	}
	if exists {
		s.log.Info("starting from this replica's own commit", "why", why, "committed", committed)
	} else {
		s.log.Info("no published position and no consumer: replaying every object", "why", why)
	}
	return committed, exists, nil
}
