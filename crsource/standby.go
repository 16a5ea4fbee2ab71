package crsource

// Warm standby under the manager's leader election (Options.Standby).
//
// Give each replica its own journal file (its own volume or path) and set
// Options.Standby:
//
//	src, err := crsource.New(cfg, crsource.Options{Path: "/data/cm.db", Resource: res,
//		Standby: &crsource.Standby{Namespace: "mirror-system", Name: "mirror-position"}})
//	err = src.AddToManager(mgr) // the writer on every replica, the publisher on the leader
//	err = ctrl.NewControllerManagedBy(mgr).Named("mirror").
//		WatchesRawSource(src).
//		Complete(src.Reconciler(&MyReconciler{}))
//
// Every replica runs the journal's writer (the writer Runnable, whose
// NeedLeaderElection is false, like controller-runtime's cache), each on
// its own file, so a standby's journal is current when it takes over; only
// the leader runs the controller and so the Source (feeder and committer).
// The position that matters moves across replicas as a resourceVersion:
//
//   - The leader publishes P, how far it has reconciled, in the annotation
//     AnnotationPosition of a Lease of its own (Standby.Name in
//     Standby.Namespace; never the leader-election Lease, which client-go's
//     LeaseLock updates from the copy it last read, so a foreign write makes
//     its renew conflict). P is the resourceVersion of the last committed
//     event seen on a watch, or the journal's resourceVersion when the
//     commit reached the head (which moves on with the watch's bookmarks
//     while nothing changes; see positionAt for why not a relist's events).
//     The publisher Runnable (needs leader election) writes it when it
//     moved, at most every Standby.Interval (or Standby.Commits commits),
//     and once more on a graceful stop: the manager stops its
//     leader-election Runnables before it releases the election Lease, so
//     the next leader reads the final P (with LeaderElectionReleaseOnCancel
//     it takes over at once). RBAC: get, create and update on
//     leases.coordination.k8s.io in Standby.Namespace, as leader election
//     needs.
//   - A new leader reads P and starts its consumer right after the last
//     event of its own journal seen on a watch whose resourceVersion is at
//     or before P (startFor; compared with CompareResourceVersion; where
//     that refuses the resourceVersions, the event whose resourceVersion
//     equals it), conservatively: it replays more, never less. Every change
//     after P is delivered, and of those before it only what its journal
//     cannot rule out, such as a relist's events (in key order, with the
//     objects' own resourceVersions, they do not say when they happened, so
//     they are delivered again). Failover reconciles what changed since the
//     old leader's last published position, not every object: in the test,
//     the 15 objects changed after the leader stopped, of 71. After a crash
//     (no final publish; the next leader waits out the election Lease) it is
//     up to Standby.Interval of changes more: 25 of 71 in the test. When
//     this replica's own commit is later, it starts there.
//   - A P it cannot place starts a resync (every key of the index is
//     queued, as in source.go, "Bounds"), and the log says why: no position
//     published (the first leader), a position for another resource, or one
//     older than what retention left of this replica's journal.
//
// States of one replica: standby (writer only; the follower commits its
// consumer behind the leader's P, so retention trims its journal as the
// leader's and is not held back) → leader (writer, source, publisher) →
// stopped. controller-runtime ends the process when leadership is lost, so
// there is no way back to standby.
//
// Two replicas on one file is not supported: the journal file is locked
// from New on, so the second replica's New fails, after journal.Options'
// lock timeout of 1 s, with an error matching journal.ErrLocked
// ("database file is locked by another process: ... (waited 1s)"), before
// its manager starts. Without Options.Standby, AddToManager adds the
// writer alone, and a new leader starts from its own committed offset (a
// standby whose consumer never committed delivers every event it
// retains).

import (
	"context"
	"errors"
	"fmt"
	"os"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	"github.com/watchjournal/watchjournal/internal/position"
	"github.com/watchjournal/watchjournal/jcache"
	"github.com/watchjournal/watchjournal/journal"
)

// Annotations of the position Lease (Standby).
const (
	// AnnotationPosition holds the published position: the
	// resourceVersion up to which the leader has reconciled (opaque).
	AnnotationPosition = "watchjournal.io/position"
	// AnnotationPositionResource names the resource the position belongs
	// to (journal.Resource.String without the shard selector): a leader
	// of another resource's journal ignores the position (and resyncs).
	AnnotationPositionResource = "watchjournal.io/position-resource"
)

// ErrStandbyNotAdded is returned by Start (and so by the controller's and
// the manager's Start) for a source with Options.Standby whose
// AddToManager was never called: without it the writer would run only on
// the leader (a cold standby) and the position would never be published.
var ErrStandbyNotAdded = errors.New("crsource: Options.Standby is set but src.AddToManager(mgr) was not called: " +
	"it adds the journal's writer (on every replica) and the position publisher (on the leader)")

// Standby configures the warm standby of a source under leader election
// (standby.go, at the top): the same settings as jcache.Exact's
// (jcache.Standby). Namespace is required; Name defaults to
// "<consumer>-position" (Options.Consumer, default DefaultConsumer);
// Interval to jcache.DefaultStandbyInterval.
type Standby = jcache.Standby

// standby is the state of a source with Options.Standby. The position's
// computation, the Lease, the publisher and the follower are
// internal/position's (shared with jcache.Exact).
type standby struct {
	opts     Standby
	resource string
	lease    *position.Lease
	added    bool // AddToManager was called
	signal   *position.Signal
	tracker  position.Tracker // the position to publish
	stopped  chan struct{}
}

func newStandby(cfg *rest.Config, opts Options) (*standby, error) {
	so := *opts.Standby
	if so.Namespace == "" {
		return nil, errors.New("crsource: Options.Standby.Namespace is empty")
	}
	if so.Name == "" {
		name := opts.Consumer
		if name == "" {
			name = DefaultConsumer
		}
		so.Name = name + "-position"
	}
	if so.Identity == "" {
		so.Identity, _ = os.Hostname()
	}
	if so.Interval <= 0 {
		so.Interval = jcache.DefaultStandbyInterval
	}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("crsource: %w", err)
	}
	sig := position.NewSignal()
	return &standby{opts: so, resource: position.Resource(opts.Resource), signal: sig, tracker: position.Tracker{Signal: sig},
		lease:   &position.Lease{Client: cs.CoordinationV1().Leases(so.Namespace), Namespace: so.Namespace, Name: so.Name, Identity: so.Identity},
		stopped: make(chan struct{})}, nil
}

// AddToManager adds to mgr what a source with Options.Standby needs
// besides the controller: the journal's writer, run on every replica
// (NeedLeaderElection false), so a standby's journal is current when it
// becomes the leader; the position publisher, run on the leader only; and
// the follower, which moves a standby's consumer behind the published
// position so that retention trims its journal as the leader's. Call it
// once, before mgr.Start. Without Options.Standby it adds only the writer
// (then the writer runs on every replica, and the controller on the
// leader starts from this replica's own committed offset: a cold
// standby's position).
func (s *Source) AddToManager(mgr manager.Manager) error {
	if s.loop == nil {
		return errors.New("crsource: AddToManager needs a source made by New (NewFromConsumer has no writer)")
	}
	if err := mgr.Add(writerRunnable{s}); err != nil {
		return err
	}
	if s.sb == nil {
		return nil
	}
	if err := mgr.Add(publisherRunnable{s}); err != nil {
		return err
	}
	if err := mgr.Add(followerRunnable{s}); err != nil {
		return err
	}
	s.sb.added = true
	return nil
}

// writerRunnable runs the journal's writer on every replica.
type writerRunnable struct{ s *Source }

// NeedLeaderElection returns false: every replica keeps its journal.
func (writerRunnable) NeedLeaderElection() bool { return false }

// Start runs the writer until ctx is done.
func (w writerRunnable) Start(ctx context.Context) error {
	s := w.s
	if !s.acquire() {
		return errors.New("crsource: journal already closed")
	}
	defer s.release()
	if !s.claimWriter() {
		<-ctx.Done()
		return nil
	}
	if err := s.runWriter(ctx); err != nil { // the loop and its retention
		s.fail(err)
		return err
	}
	return nil
}

// publisherRunnable publishes the leader's position.
type publisherRunnable struct{ s *Source }

// NeedLeaderElection returns true: only the leader publishes.
func (publisherRunnable) NeedLeaderElection() bool { return true }

// Start publishes the position when it moves, at most every Interval (or
// Commits), until ctx is done; then it waits for the source's last commit
// and publishes once more (position.Publisher).
func (p publisherRunnable) Start(ctx context.Context) error {
	s, sb := p.s, p.s.sb
	pub := &position.Publisher{Lease: sb.lease, Signal: sb.signal, Interval: sb.opts.Interval, Commits: sb.opts.Commits, Log: s.log,
		Annotations: func() map[string]string {
			pos := sb.tracker.Position()
			if pos == "" {
				return nil
			}
			return map[string]string{AnnotationPosition: pos, AnnotationPositionResource: sb.resource}
		},
		Refresh: s.refreshPosition,
		Stopped: func(ctx context.Context) {
			select {
			case <-sb.stopped:
			case <-ctx.Done():
			}
		},
	}
	return pub.Run(ctx)
}

// followerRunnable moves a standby's consumer behind the leader's
// published position.
type followerRunnable struct{ s *Source }

// NeedLeaderElection returns false: it runs on standbys (and stops
// touching the consumer once this replica's source starts).
func (followerRunnable) NeedLeaderElection() bool { return false }

// Start reads the published position every Interval and commits this
// replica's consumer up to the events it covers, while the source has not
// started here. A registered consumer holds retention back (until the hard
// byte cap): without this, a standby's journal would never be trimmed.
func (f followerRunnable) Start(ctx context.Context) error {
	s, sb := f.s, f.s.sb
	if !s.acquire() {
		return nil
	}
	defer s.release()
	fo := &position.Follower{Journal: s.j, Committed: s.c.Committed, Log: s.log,
		Commit: func(p uint64) error {
			s.mu.Lock()
			defer s.mu.Unlock()
			if s.started {
				return nil
			}
			return s.j.CommitConsumer(s.c.Name(), p)
		}}
	position.Follow(ctx, sb.lease, sb.opts.Interval, func(ann map[string]string) bool {
		s.mu.Lock()
		leading := s.started
		s.mu.Unlock()
		if leading {
			return false
		}
		if ann[AnnotationPositionResource] == sb.resource {
			fo.Step(ann[AnnotationPosition])
		}
		return true
	})
	return nil
}

// noteCommit records that the consumer committed offset p: the position
// moves to what p covers (positionAt), never back.
func (s *Source) noteCommit(p uint64) {
	if s.sb == nil {
		return
	}
	s.sb.tracker.NoteCommit(s.j, p)
}

// refreshPosition recomputes the position from the committed offset: with
// the commit at the head, the journal's resourceVersion moves on with the
// watch's bookmarks, and so does the position, though nothing is
// committed (a quiet resource). A standby compares it with its own
// journal's resourceVersion (startFor), so it keeps following.
func (s *Source) refreshPosition() {
	if c, err := s.c.Committed(); err == nil && c > 0 {
		s.sb.tracker.Note(s.j, c)
	}
}

// positionAt returns the position that committed offset p covers
// (position.Tracker.At).
func (sb *standby) positionAt(j *journal.Journal, p uint64) (string, error) {
	return sb.tracker.At(j, p)
}

// startFor places the published position pos in j (position.StartFor).
func startFor(j *journal.Journal, pos string, floor uint64) (start uint64, why string, ok bool, err error) {
	return position.StartFor(j, pos, floor)
}

// standbyStart positions the consumer of a new leader (top of this
// file): right after what the published position
// covers, or after this replica's own commit when that is later; a
// resync when the position cannot be placed. It runs in the feeder before
// its first read.
func (s *Source) standbyStart(ctx context.Context) error {
	sb := s.sb
	var ann map[string]string // the position Lease's annotations
	var found bool
	for {
		var err error
		ann, found, err = sb.lease.Get(ctx)
		if err == nil {
			break
		}
		if apierrors.IsForbidden(err) || apierrors.IsUnauthorized(err) {
			return fmt.Errorf("crsource: reading the position Lease %s/%s (RBAC: get, create, update on leases.coordination.k8s.io in %s): %w",
				sb.opts.Namespace, sb.opts.Name, sb.opts.Namespace, err)
		}
		s.log.Error(err, "reading the position Lease failed; retrying", "lease", sb.opts.Namespace+"/"+sb.opts.Name)
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(time.Second):
		}
	}
	lease := sb.opts.Namespace + "/" + sb.opts.Name
	pos, res := ann[AnnotationPosition], ann[AnnotationPositionResource]
	var why string
	switch {
	case !found || pos == "":
		why = "no position published on Lease " + lease
	case res != sb.resource:
		why = fmt.Sprintf("the position on Lease %s is for another resource (%s, not %s)", lease, res, sb.resource)
	default:
		start, how, ok, err := startFor(s.j, pos, 0)
		if err != nil {
			return fmt.Errorf("crsource: placing the position %s: %w", pos, err)
		}
		if !ok {
			why = how
			break
		}
		committed, err := s.c.Committed()
		if err != nil {
			return fmt.Errorf("crsource: %w", err)
		}
		if committed+1 > start {
			start, how = committed+1, "this replica's own commit is later: "+how
		}
		sb.tracker.Set(pos) // publishes never go below where this leader starts
		s.log.Info("starting from the published position", "resourceVersion", pos, "offset", start, "how", how)
		s.c.Seek(start)
		s.t.FedTo(start - 1)
		return nil
	}
	s.log.Info("resync: queueing every key", "why", why)
	s.resyncFirst = true
	return nil
}

// claimWriter reports whether the caller is the one to run the writer
// (the first to ask).
func (s *Source) claimWriter() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.writerClaimed {
		return false
	}
	s.writerClaimed = true
	return true
}

// acquire counts one more user of the journal (the writer Runnable, the
// follower, the source); false when it is already closed.
func (s *Source) acquire() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return false
	}
	s.users++
	return true
}

// release ends one use; the last closes the journal (for New) and Done.
func (s *Source) release() {
	s.mu.Lock()
	s.users--
	last := s.users == 0
	if last {
		s.closed = true
	}
	s.mu.Unlock()
	if !last {
		return
	}
	if s.loop != nil {
		_ = s.j.Close()
	}
	close(s.done)
}
