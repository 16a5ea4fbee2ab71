package position

// The warm standby under the manager's leader election, behind
// jcache.Exact's ExactOptions.Standby (every source of a controller in one
// JSON annotation). The adapter (jcache/standby.go) says what is its own:
// the Codec of the annotations, the Sources, the error prefix, and what a
// new leader's source does with where it starts.
//
// Every replica keeps its own journal current (the jcache cache:
// NeedLeaderElection false); only the leader runs the
// controller and so the sources. What moves across replicas is each
// source's position P, a resourceVersion:
//
//   - The leader's publisher (a leader-election Runnable) reads its term
//     from the leader-election Lease (Config.LeaderElectionID) when it
//     starts, and writes the sources' P under it (Tracker: the RV of the
//     last committed watch event, or the journal's resourceVersion once
//     the commit reached the head, which moves on with bookmarks) on a
//     Lease of its own (Config.Name
//     in Config.Namespace; never the leader-election Lease): when they
//     moved, at most every Interval (or after Commits commits), on every
//     Interval tick after a refresh, and once more on a graceful stop,
//     after the sources' final commits: the manager stops its
//     leader-election Runnables before it releases the election Lease, so
//     the next leader reads the final P. After a crash (no final publish)
//     the next leader replays up to Interval of changes more. Each write
//     carries the term; a write of a deposed leader is refused and it
//     publishes no more (fence.go). RBAC: get, create and update on
//     leases.coordination.k8s.io in the namespace, get on the election
//     Lease.
//   - A new leader's source places its P in its own journal (Start,
//     StartFor) and starts right after the last event P covers, or after
//     its own commit when that is later: conservatively, more, never
//     less. A P it cannot place (none published, another resource's,
//     older than the journal's retention) is the adapter's to handle,
//     with why: jcache starts from its own consumer or replays every
//     object.
//   - The follower (a Runnable on every replica) reads the Lease every
//     Interval and commits each source's consumer behind its P (Follower),
//     so a standby's registered consumers do not hold retention back; it
//     stops touching a source once it started here.
//
// States of a replica: standby (journal, follower) → leader (sources,
// publisher) → stopped; controller-runtime ends the process when
// leadership is lost, so there is no way back to standby.

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"os"
	"sync"
	"time"

	"github.com/go-logr/logr"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	"github.com/watchjournal/watchjournal/journal"
)

// Config is a standby's settings: the fields of jcache.Standby, in its
// order, so that one converts to the other.
type Config struct {
	Namespace, Name, Identity string
	Interval                  time.Duration
	Commits                   int
	// The manager's leader-election Lease, whose term fences the
	// publishes (fence.go); no LeaderElectionID: the publishes are not
	// fenced.
	LeaderElectionID, LeaderElectionNamespace string
}

// Entry is one source's published position: the resourceVersion up to
// which its events are reconciled, and the resource (Resource) it
// belongs to.
type Entry struct {
	ResourceVersion string `json:"resourceVersion"`
	Resource        string `json:"resource"`
}

// Codec is how the position Lease's annotations hold the entries, by
// consumer name: Encode is given at least one; Decode returns nil for
// none, an error when they do not parse.
type Codec struct {
	Encode func(map[string]Entry) map[string]string
	Decode func(ann map[string]string) (map[string]Entry, error)
}

// Source is what the publisher needs of one source, as it is now.
type Source struct {
	Name, Resource string // the consumer and Resource, "" before known
	Tracker        *Tracker
	Journal        *journal.Journal // nil before known
	// Committed returns the consumer's committed offset.
	Committed func() (uint64, error)
	// Stopped is closed once the source made its final commit; nil when
	// there is none to wait for.
	Stopped <-chan struct{}
}

// Standby is the warm standby of one controller's sources. Make it with
// NewStandby; set Codec, Sources and Log before AddToManager.
type Standby struct {
	Config
	Prefix     string // of its errors, e.g. "jcache"
	NoPosition string // why a source has no entry, before the Lease's name
	Carry      bool   // publish the entries read at start of sources with no position yet
	Codec      Codec
	Sources    func() []Source
	Log        logr.Logger // the publisher's
	Signal     *Signal
	Lease      *Lease // set by NewLease
	// Election is the leader-election Lease (Config.LeaderElectionID),
	// also Lease.Election; set by NewLease, nil without LeaderElectionID.
	Election *Election

	mu    sync.Mutex
	added bool             // AddToManager was called
	read  map[string]Entry // what the first source to start read
}

// NewStandby returns a Standby for c with the defaults filled in: Name
// defaultName, Identity the host name, Interval DefaultInterval,
// LeaderElectionNamespace Namespace. field names the option in the error
// for an empty Namespace.
func NewStandby(c Config, prefix, field, defaultName string) (*Standby, error) {
	if c.Namespace == "" {
		return nil, fmt.Errorf("%s: %s.Namespace is empty", prefix, field)
	}
	if c.Name == "" {
		c.Name = defaultName
	}
	if c.Identity == "" {
		c.Identity, _ = os.Hostname()
	}
	if c.Interval <= 0 {
		c.Interval = DefaultInterval
	}
	if c.LeaderElectionNamespace == "" {
		c.LeaderElectionNamespace = c.Namespace
	}
	return &Standby{Config: c, Prefix: prefix, Signal: NewSignal()}, nil
}

// NewLease sets the position Lease and, with LeaderElectionID, Election,
// with clients made from cfg.
func (sb *Standby) NewLease(cfg *rest.Config) error {
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return fmt.Errorf("%s: %w", sb.Prefix, err)
	}
	if sb.LeaderElectionID != "" {
		sb.Election = &Election{Client: cs.CoordinationV1().Leases(sb.LeaderElectionNamespace),
			Namespace: sb.LeaderElectionNamespace, Name: sb.LeaderElectionID}
	}
	sb.Lease = &Lease{Client: cs.CoordinationV1().Leases(sb.Namespace), Namespace: sb.Namespace, Name: sb.Name, Identity: sb.Identity,
		Election: sb.Election}
	return nil
}

// Runnable is a manager.Runnable that runs Run, on the leader only when
// Leader (manager.LeaderElectionRunnable).
type Runnable struct {
	Leader bool
	Run    func(context.Context) error
}

// NeedLeaderElection returns Leader.
func (r Runnable) NeedLeaderElection() bool { return r.Leader }

// Start calls Run.
func (r Runnable) Start(ctx context.Context) error { return r.Run(ctx) }

// AddToManager adds the publisher (on the leader only) and the follower
// follow (on every replica) to mgr, and marks the standby added.
func (sb *Standby) AddToManager(mgr manager.Manager, follow func(context.Context) error) error {
	if err := mgr.Add(Runnable{Leader: true, Run: sb.publish}); err != nil {
		return err
	}
	if err := mgr.Add(Runnable{Run: follow}); err != nil {
		return err
	}
	sb.mu.Lock()
	sb.added = true
	sb.mu.Unlock()
	return nil
}

// Added reports whether AddToManager was called.
func (sb *Standby) Added() bool {
	sb.mu.Lock()
	defer sb.mu.Unlock()
	return sb.added
}

// annotations returns what to publish, nil before any position is known:
// with Carry, the entries read at start, overlaid with every source's
// current position.
func (sb *Standby) annotations() map[string]string {
	out := map[string]Entry{}
	if sb.Carry {
		sb.mu.Lock()
		maps.Copy(out, sb.read)
		sb.mu.Unlock()
	}
	for _, s := range sb.Sources() {
		if pos := s.Tracker.Position(); s.Name != "" && s.Resource != "" && pos != "" {
			out[s.Name] = Entry{ResourceVersion: pos, Resource: s.Resource}
		}
	}
	if len(out) == 0 {
		return nil
	}
	return sb.Codec.Encode(out)
}

// publish reads this leader's term, then writes the positions under it
// until ctx is done, then once more (see the top of this file); it
// returns early, publishing no more, once a write was fenced (the
// election Lease is held by another leader: fence.go). Its error: the election Lease may not be read
// (RBAC).
func (sb *Standby) publish(ctx context.Context) error {
	term, err := sb.term(ctx)
	if err != nil || ctx.Err() != nil {
		return err
	}
	var last map[string]string
	var lastAt time.Time
	fenced := false
	write := func(ctx context.Context) {
		ann := sb.annotations()
		if len(ann) == 0 || maps.Equal(ann, last) {
			return
		}
		if err := sb.Lease.Put(ctx, ann, term); err != nil {
			if errors.Is(err, ErrFenced) {
				fenced = true
				sb.Log.Error(err, "another leader holds the leader-election Lease and published on the position Lease: this replica was deposed and publishes no more",
					"lease", sb.Lease.String(), "position", ann)
			} else if ctx.Err() == nil {
				sb.Log.Error(err, "publishing the position failed", "lease", sb.Lease.String(), "position", ann)
			}
			return
		}
		last, lastAt = ann, time.Now()
		sb.Signal.mu.Lock()
		sb.Signal.commits = 0
		sb.Signal.mu.Unlock()
	}
	timer := time.NewTimer(sb.Interval)
	defer timer.Stop()
	for {
		select {
		case <-ctx.Done():
			// Bounded: a stuck source costs the next leader a longer
			// replay, never a lost event.
			sctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			sb.stopped(sctx)
			cancel()
			fctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			write(fctx)
			cancel()
			return nil
		case <-sb.Signal.moved:
			sb.Signal.mu.Lock()
			many := sb.Commits > 0 && sb.Signal.commits >= sb.Commits
			sb.Signal.mu.Unlock()
			if wait := sb.Interval - time.Since(lastAt); !many && wait > 0 {
				timer.Reset(wait) // no stale tick since Go 1.23
				continue
			}
			write(ctx)
		case <-timer.C:
			sb.refresh()
			write(ctx)
			timer.Reset(sb.Interval)
		}
		if fenced {
			return nil
		}
	}
}

// term returns the term this leader publishes under: the election
// Lease's, read again every second while that fails but for a refusal
// (RBAC: its error); the zero Term without Election, or when ctx ends
// first.
func (sb *Standby) term(ctx context.Context) (Term, error) {
	if sb.Election == nil {
		return Term{}, nil
	}
	for {
		t, err := sb.Election.Term(ctx)
		if err == nil {
			sb.Log.Info("publishing under this leader's term", "term", t.String())
			return t, nil
		}
		if apierrors.IsForbidden(err) || apierrors.IsUnauthorized(err) {
			return Term{}, fmt.Errorf("%s: reading the leader-election Lease %s (RBAC: get on leases.coordination.k8s.io in %s): %w",
				sb.Prefix, sb.Election, sb.LeaderElectionNamespace, err)
		}
		if ctx.Err() != nil {
			return Term{}, nil
		}
		sb.Log.Error(err, "reading the leader-election Lease failed; retrying", "lease", sb.Election.String())
		select {
		case <-ctx.Done():
			return Term{}, nil
		case <-time.After(time.Second):
		}
	}
}

// refresh recomputes the positions from the committed offsets: with the
// commit at the head, the journal's resourceVersion moves on with the
// watch's bookmarks, and so does the position, though nothing is
// committed (a quiet resource).
func (sb *Standby) refresh() {
	for _, s := range sb.Sources() {
		if s.Journal == nil {
			continue
		}
		if c, err := s.Committed(); err == nil && c > 0 {
			s.Tracker.Note(s.Journal, c)
		}
	}
}

// stopped returns once every source made its final commit, or ctx is
// done.
func (sb *Standby) stopped(ctx context.Context) {
	for _, s := range sb.Sources() {
		if s.Stopped != nil {
			select {
			case <-s.Stopped:
			case <-ctx.Done():
				return
			}
		}
	}
}

// Follow reads the Lease every Interval and steps each follower whose
// source has not started here to its entry, when that is of its
// resource; until ctx is done or every source started.
func (sb *Standby) Follow(ctx context.Context, fs []*Follower) {
	t := time.NewTicker(sb.Interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		ann, ok, err := sb.Lease.Get(ctx)
		if err != nil || !ok {
			continue
		}
		m, err := sb.Codec.Decode(ann)
		if err != nil {
			continue
		}
		waiting := false
		for _, f := range fs {
			if f.started() {
				continue
			}
			waiting = true
			if e, ok := m[f.Name]; ok && e.Resource == f.Resource {
				f.Step(e.ResourceVersion)
			}
		}
		if !waiting {
			return
		}
	}
}

// entries reads the Lease's entries, again every second while that fails but
// for a refusal (RBAC); ctx's error when ctx ends first.
func (sb *Standby) entries(ctx context.Context, log logr.Logger) (map[string]Entry, error) {
	for {
		ann, ok, err := sb.Lease.Get(ctx)
		if err == nil && !ok {
			return nil, nil
		}
		if err == nil {
			var m map[string]Entry
			if m, err = sb.Codec.Decode(ann); err == nil {
				return m, nil
			}
		}
		if apierrors.IsForbidden(err) || apierrors.IsUnauthorized(err) {
			return nil, fmt.Errorf("%s: reading the position Lease %s (RBAC: get, create, update on leases.coordination.k8s.io in %s): %w",
				sb.Prefix, sb.Lease, sb.Namespace, err)
		}
		log.Error(err, "reading the position Lease failed; retrying", "lease", sb.Lease.String())
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(time.Second):
		}
	}
}

// Start places the published entry of a new leader's source name (of
// resource, on journal j, whose consumer has committed committed when it
// exists) and, when it can, calls seek with the offset to start at: right
// after what the entry covers, or after the consumer's own commit when
// that is later. Then publishes never go below the entry (t), and the log
// says where it starts. Without a place, why says why (the caller starts
// as it would without a standby); why is "" when ctx ended first.
func (sb *Standby) Start(ctx context.Context, log logr.Logger, j *journal.Journal, t *Tracker, name, resource string,
	committed uint64, exists bool, seek func(start uint64) error) (why string, err error) {
	m, err := sb.entries(ctx, log)
	if err != nil {
		if ctx.Err() != nil && errors.Is(err, ctx.Err()) {
			return "", nil
		}
		return "", err
	}
	sb.mu.Lock()
	if sb.read == nil {
		sb.read = m
	}
	sb.mu.Unlock()
	p, found := m[name]
	lease := sb.Lease.String()
	switch {
	case !found || p.ResourceVersion == "":
		return sb.NoPosition + lease, nil
	case p.Resource != resource:
		return fmt.Sprintf("the position on Lease %s is for another resource (%s, not %s)", lease, p.Resource, resource), nil
	}
	start, how, ok, err := StartFor(j, p.ResourceVersion, 0)
	if err != nil {
		return "", fmt.Errorf("%s: placing the position %s: %w", sb.Prefix, p.ResourceVersion, err)
	}
	if !ok {
		return how, nil
	}
	if exists && committed+1 > start {
		start, how = committed+1, "this replica's own commit is later: "+how
	}
	t.Set(p.ResourceVersion) // publishes never go below where this leader starts
	if err := seek(start); err != nil {
		return "", err
	}
	log.Info("starting from the published position", "resourceVersion", p.ResourceVersion, "offset", start, "how", how)
	return "", nil
}
