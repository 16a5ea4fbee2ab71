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
// its own file, so a standby's journal is current when it takes over;
// only the leader runs the controller and so the Source (feeder and
// committer). How the position moves across replicas (the publisher on
// the leader, the follower on every replica, where a new leader starts)
// is internal/position's Standby, shared with jcache.Exact (see the top
// of internal/position/standby.go). What is crsource's:
//
//   - The position P is this source's, in two annotations of the
//     position Lease (Standby.Name in Standby.Namespace; RBAC: get,
//     create and update on leases.coordination.k8s.io there):
//     AnnotationPosition and AnnotationPositionResource.
//   - A new leader starts its consumer (Seek) right after the last event
//     of its own journal P covers: failover reconciles what changed since
//     the old leader's last published position, not every object. In the
//     test, the 15 objects changed after the leader stopped, of 71; after
//     a crash (no final publish; the next leader waits out the election
//     Lease) up to Standby.Interval of changes more: 25 of 71.
//   - A P it cannot place starts a resync (every key of the index is
//     queued, as in source.go, "Bounds"), and the log says why: no
//     position published (the first leader), a position for another
//     resource, or one older than what retention left of this replica's
//     journal.
//
// Two replicas on one file is not supported: the journal file is locked
// from New on, so the second replica's New fails, after journal.Options'
// lock timeout of 1 s, with an error matching journal.ErrLocked
// ("database file is locked by another process: ... (waited 1s)"), before
// its manager starts.

import (
	"cmp"
	"context"
	"errors"
	"fmt"

	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	"github.com/watchjournal/watchjournal/internal/position"
	"github.com/watchjournal/watchjournal/jcache"
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

// standby is the state of a source with Options.Standby: its one source
// in internal/position's Standby (shared with jcache.Exact), whose
// entry is the two annotations above.
type standby struct {
	*position.Standby
	resource string
	tracker  position.Tracker // the position to publish
	stopped  chan struct{}    // closed when the source stopped (its final commit made)
}

func newStandby(cfg *rest.Config, s *Source, opts Options) (*standby, error) {
	name := cmp.Or(opts.Consumer, DefaultConsumer)
	ps, err := position.NewStandby(position.Config(*opts.Standby), "crsource", "Options.Standby", name+"-position")
	if err != nil {
		return nil, err
	}
	if err := ps.NewLease(cfg); err != nil {
		return nil, err
	}
	sb := &standby{Standby: ps, resource: position.Resource(opts.Resource), stopped: make(chan struct{})}
	sb.tracker.Signal = ps.Signal
	ps.NoPosition, ps.Log = "no position published on Lease ", s.log
	ps.Codec = position.Codec{
		Encode: func(m map[string]position.Entry) map[string]string {
			for _, e := range m { // one entry, this source's
				return map[string]string{AnnotationPosition: e.ResourceVersion, AnnotationPositionResource: e.Resource}
			}
			return nil
		},
		Decode: func(ann map[string]string) (map[string]position.Entry, error) {
			return map[string]position.Entry{s.c.Name(): {ResourceVersion: ann[AnnotationPosition], Resource: ann[AnnotationPositionResource]}}, nil
		},
	}
	ps.Sources = func() []position.Source {
		return []position.Source{{Name: s.c.Name(), Resource: sb.resource, Tracker: &sb.tracker, Journal: s.j, Committed: s.c.Committed, Stopped: sb.stopped}}
	}
	return sb, nil
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
// standby's position; one whose consumer never committed delivers every
// event it retains).
func (s *Source) AddToManager(mgr manager.Manager) error {
	if s.loop == nil {
		return errors.New("crsource: AddToManager needs a source made by New (NewFromConsumer has no writer)")
	}
	if err := mgr.Add(position.Runnable{Run: s.writeOnReplica}); err != nil {
		return err
	}
	if s.sb == nil {
		return nil
	}
	return s.sb.AddToManager(mgr, s.follow)
}

// writeOnReplica, the writer Runnable, runs the journal's writer until
// ctx is done, unless Start runs it.
func (s *Source) writeOnReplica(ctx context.Context) error {
	if !s.acquire() {
		return errors.New("crsource: journal already closed")
	}
	defer s.release()
	if !s.writerClaimed.CompareAndSwap(false, true) {
		<-ctx.Done()
		return nil
	}
	if err := s.runWriter(ctx); err != nil { // the loop and its retention
		s.fail(err)
		return err
	}
	return nil
}

// follow, the follower Runnable, reads the published position every
// Interval and commits this replica's consumer up to the events it
// covers, while the source has not started here. A registered consumer
// holds retention back (until the hard byte cap): without this, a
// standby's journal would never be trimmed.
func (s *Source) follow(ctx context.Context) error {
	if !s.acquire() {
		return nil
	}
	defer s.release()
	s.sb.Follow(ctx, []*position.Follower{{Name: s.c.Name(), Resource: s.sb.resource, Journal: s.j, Mu: &s.mu, Started: &s.started, Log: s.log}})
	return nil
}

// standbyStart positions the consumer of a new leader (top of this
// file): right after what the published position
// covers, or after this replica's own commit when that is later; a
// resync when the position cannot be placed. It runs in the feeder before
// its first read.
func (s *Source) standbyStart(ctx context.Context) error {
	committed, err := s.c.Committed()
	if err != nil {
		return fmt.Errorf("crsource: %w", err)
	}
	why, err := s.sb.Start(ctx, s.log, s.j, &s.sb.tracker, s.c.Name(), s.sb.resource, committed, true, func(start uint64) error {
		s.c.Seek(start)
		s.t.FedTo(start - 1)
		return nil
	})
	if err != nil || why == "" {
		return err
	}
	s.log.Info("resync: queueing every key", "why", why)
	s.resyncFirst = true
	return nil
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
