package crsource

// Warm standby (doc.go, "Leader election and a warm standby").
//
// Every replica runs the journal's writer (the writer Runnable, which does
// not need leader election), each on its own file; only the leader runs the
// controller and so the Source (feeder and committer). The position that
// matters moves across replicas as a resourceVersion:
//
//   - The leader publishes P, how far it has reconciled, on a Lease of its
//     own (Standby.Name in Standby.Namespace; never the leader-election
//     Lease, which client-go's LeaseLock updates from the copy it last
//     read, so a foreign write makes its renew conflict). P is the
//     resourceVersion of the last committed event seen on a watch, or the
//     journal's resourceVersion when the commit reached the head (see
//     positionAt for why not a relist's events). The publisher Runnable
//     (needs leader election) writes it at most every Standby.Interval (or
//     Standby.Commits commits) and once more on a graceful stop: the
//     manager stops its leader-election Runnables before it releases the
//     election Lease, so the next leader reads the final P.
//   - A new leader reads P and starts its consumer right after the last
//     event of its own journal that P covers (startFor), conservatively: it
//     replays more, never less. A P it cannot place (none published,
//     another resource's, older than its journal's retention) starts a
//     resync: every key of the index is queued.
//
// States of one replica: standby (writer only; the follower commits its
// consumer behind the leader's P, so retention is not held back) → leader
// (writer, source, publisher) → stopped. controller-runtime ends the
// process when leadership is lost, so there is no way back to standby.

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
	"sync"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/resourceversion"
	"k8s.io/client-go/kubernetes"
	coordinationclient "k8s.io/client-go/kubernetes/typed/coordination/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/manager"

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

// DefaultPublishInterval is the default Standby.Interval.
const DefaultPublishInterval = 5 * time.Second

// ErrStandbyNotAdded is returned by Start (and so by the controller's and
// the manager's Start) for a source with Options.Standby whose
// AddToManager was never called: without it the writer would run only on
// the leader (a cold standby) and the position would never be published.
var ErrStandbyNotAdded = errors.New("crsource: Options.Standby is set but src.AddToManager(mgr) was not called: " +
	"it adds the journal's writer (on every replica) and the position publisher (on the leader)")

// Standby configures the warm standby of a source under leader election
// (doc.go, "Leader election and a warm standby"). Namespace is required.
type Standby struct {
	// Namespace is where the position Lease lives: the operator's own
	// namespace, as for its leader-election Lease.
	Namespace string
	// Name is the position Lease's name. Default "<consumer>-position"
	// (Options.Consumer, default DefaultConsumer); two controllers, or two
	// operators, in one namespace need two names. Never the
	// leader-election Lease's name.
	Name string
	// Identity is written as the Lease's holderIdentity (who published
	// last). Default the host name.
	Identity string
	// Interval is the least time between two publishes: the leader writes
	// the Lease when its position moved and Interval has passed since the
	// last write. Default DefaultPublishInterval. After a crash of the
	// leader (no graceful stop), the next leader replays at most what was
	// committed in the last Interval, plus what was not committed.
	Interval time.Duration
	// Commits, when above 0, also publishes once the commit has moved
	// Commits times since the last write, before Interval has passed. Each
	// publish is one Lease update on the apiserver.
	Commits int
}

// standby is the state of a source with Options.Standby.
type standby struct {
	opts     Standby
	resource string
	leases   coordinationclient.LeaseInterface
	added    bool                  // AddToManager was called
	written  *coordinationv1.Lease // the position Lease as last written (publisher only), nil when unknown

	mu      sync.Mutex
	pos     string    // position to publish, "" before one is known
	scanned uint64    // positionAt has looked at every event up to here
	watchRV string    // RV of the last watch event at or before scanned
	commits int       // commits since the last publish
	moved   chan bool // buffered 1: pos moved
	stopped chan struct{}
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
		so.Interval = DefaultPublishInterval
	}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("crsource: %w", err)
	}
	return &standby{opts: so, resource: positionResource(opts.Resource),
		leases: cs.CoordinationV1().Leases(so.Namespace), moved: make(chan bool, 1), stopped: make(chan struct{})}, nil
}

// positionResource names the resource a position belongs to: the watch's
// GVR, namespace and selectors (not the shard range, nor the
// metadata-only choice, which do not change resourceVersions).
func positionResource(r journal.Resource) string {
	r.ShardSelector, r.MetadataOnly, r.Kind, r.APIVersion = "", false, "", ""
	return r.String()
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
// and publishes once more.
func (p publisherRunnable) Start(ctx context.Context) error {
	s, sb := p.s, p.s.sb
	var last string
	lastAt := time.Time{}
	publish := func(ctx context.Context) {
		sb.mu.Lock()
		pos := sb.pos
		sb.mu.Unlock()
		if pos == "" || pos == last {
			return
		}
		if err := sb.put(ctx, pos); err != nil {
			if ctx.Err() == nil {
				s.log.Error(err, "publishing the position failed", "lease", sb.opts.Namespace+"/"+sb.opts.Name, "resourceVersion", pos)
			}
			return
		}
		last, lastAt = pos, time.Now()
		sb.mu.Lock()
		sb.commits = 0
		sb.mu.Unlock()
	}
	timer := time.NewTimer(sb.opts.Interval)
	defer timer.Stop()
	for {
		select {
		case <-ctx.Done():
			// The source's final commit, then the final publish, before the
			// manager releases the election Lease. Bounded: a stuck source
			// costs the next leader a longer replay, never a lost event.
			select {
			case <-sb.stopped:
			case <-time.After(10 * time.Second):
			}
			fctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			publish(fctx)
			cancel()
			return nil
		case <-sb.moved:
			sb.mu.Lock()
			many := sb.opts.Commits > 0 && sb.commits >= sb.opts.Commits
			sb.mu.Unlock()
			if wait := sb.opts.Interval - time.Since(lastAt); !many && wait > 0 {
				if !timer.Stop() {
					select {
					case <-timer.C:
					default:
					}
				}
				timer.Reset(wait)
				continue
			}
			publish(ctx)
		case <-timer.C:
			s.refreshPosition()
			publish(ctx)
			timer.Reset(sb.opts.Interval)
		}
	}
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
	t := time.NewTicker(sb.opts.Interval)
	defer t.Stop()
	var lastPos string
	var lastHead uint64
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
		s.mu.Lock()
		leading := s.started
		s.mu.Unlock()
		if leading {
			return nil
		}
		pos, res, ok, err := sb.get(ctx)
		if err != nil || !ok || pos == "" || res != sb.resource {
			continue
		}
		head, err := s.j.Head()
		if err != nil || (pos == lastPos && head == lastHead) {
			continue // nothing new to place: no scan
		}
		lastPos, lastHead = pos, head
		c, err := s.c.Committed()
		if err != nil {
			continue
		}
		// Only past the commit: the scan costs the events after it.
		start, _, ok, err := startFor(s.j, pos, c)
		if err != nil || !ok || start-1 <= c {
			continue
		}
		s.mu.Lock()
		if !s.started {
			if err := s.j.CommitConsumer(s.c.Name(), start-1); err != nil && !errors.Is(err, journal.ErrClosed) {
				s.log.Error(err, "following the leader's position failed", "offset", start-1)
			}
		}
		s.mu.Unlock()
	}
}

// get reads the position Lease: the position and its resource, false when
// there is no Lease.
func (sb *standby) get(ctx context.Context) (pos, res string, ok bool, err error) {
	l, err := sb.leases.Get(ctx, sb.opts.Name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return "", "", false, nil
	}
	if err != nil {
		return "", "", false, err
	}
	return l.Annotations[AnnotationPosition], l.Annotations[AnnotationPositionResource], true, nil
}

// put writes pos on the position Lease, creating it when missing.
func (sb *standby) put(ctx context.Context, pos string) error {
	now := metav1.NewMicroTime(time.Now())
	fill := func(l *coordinationv1.Lease) {
		if l.Annotations == nil {
			l.Annotations = map[string]string{}
		}
		l.Annotations[AnnotationPosition] = pos
		l.Annotations[AnnotationPositionResource] = sb.resource
		id := sb.opts.Identity
		l.Spec.HolderIdentity = &id
		l.Spec.RenewTime = &now
	}
	// The Lease last written is updated in place (one request); a
	// conflict, or none cached, reads it first.
	for try := 0; ; try++ {
		l, err := sb.written, error(nil)
		if l == nil {
			l, err = sb.leases.Get(ctx, sb.opts.Name, metav1.GetOptions{})
		}
		var out *coordinationv1.Lease
		if apierrors.IsNotFound(err) {
			l = &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: sb.opts.Name, Namespace: sb.opts.Namespace}}
			fill(l)
			out, err = sb.leases.Create(ctx, l, metav1.CreateOptions{})
		} else if err == nil {
			l = l.DeepCopy()
			fill(l)
			out, err = sb.leases.Update(ctx, l, metav1.UpdateOptions{})
		}
		sb.written = out
		if err == nil || try >= 2 || !(apierrors.IsConflict(err) || apierrors.IsAlreadyExists(err) || apierrors.IsNotFound(err)) {
			return err
		}
	}
}

// noteCommit records that the consumer committed offset p: the position
// moves to what p covers (positionAt), never back.
func (s *Source) noteCommit(p uint64) {
	if s.sb == nil {
		return
	}
	s.sb.mu.Lock()
	s.sb.commits++
	s.sb.mu.Unlock()
	s.notePosition(p)
}

// notePosition moves the position to what committed offset p covers.
func (s *Source) notePosition(p uint64) {
	sb := s.sb
	pos, err := sb.positionAt(s.j, p)
	if err != nil || pos == "" {
		return
	}
	sb.mu.Lock()
	moved := sb.pos == "" || later(pos, sb.pos)
	if moved {
		sb.pos = pos
	}
	sb.mu.Unlock()
	if moved {
		select {
		case sb.moved <- true:
		default:
		}
	}
}

// refreshPosition recomputes the position from the committed offset: with
// the commit at the head, the journal's resourceVersion moves on with the
// watch's bookmarks, and so does the position, though nothing is
// committed (a quiet resource). A standby compares it with its own
// journal's resourceVersion (startFor), so it keeps following.
func (s *Source) refreshPosition() {
	if c, err := s.c.Committed(); err == nil && c > 0 {
		s.notePosition(c)
	}
}

// later reports whether resourceVersion a is past b. RVs that do not
// compare (CompareResourceVersion refuses them) count as later when they
// differ: the newest commit's position is the one to publish.
func later(a, b string) bool {
	n, err := resourceversion.CompareResourceVersion(a, b)
	if err != nil {
		return a != b
	}
	return n > 0
}

// positionAt returns the position that committed offset p covers: a
// resourceVersion every change at or before which is reconciled.
//
//   - The journal's resourceVersion R, read before its head H, when p is
//     at or past H: every event reflecting the state at R is at or before
//     H (a relist sets R in the transaction that appends its last chunk).
//   - Otherwise the RV of the last event at or before p that was seen on a
//     watch. Watch events' RVs grow with their offsets (a watch resumes
//     after the last one, a relist's list is newer), and the state after
//     such an event is the state at its RV. A relist's events are not
//     used: they are in key order, an ADDED carries the object's RV and a
//     synthesized DELETED the last one the index held, so a relist's event
//     committed before the rest of its relist says nothing of the others.
//
// "" when p covers no such event (the caller keeps its last position).
func (sb *standby) positionAt(j *journal.Journal, p uint64) (string, error) {
	rv, err := j.ResourceVersion()
	if err != nil {
		return "", err
	}
	head, err := j.Head()
	if err != nil {
		return "", err
	}
	if p >= head && rv != "" {
		return rv, nil
	}
	sb.mu.Lock()
	from, found := sb.scanned, sb.watchRV
	sb.mu.Unlock()
	if p > from {
		e, ok, err := lastBefore(j, p, from, func(e journal.Event) bool { return e.Origin == journal.OriginWatch })
		if err != nil {
			return "", err
		}
		if ok {
			found = e.ResourceVersion
		}
		sb.mu.Lock()
		sb.scanned, sb.watchRV = p, found
		sb.mu.Unlock()
	}
	return found, nil
}

// lastBefore scans j backwards from offset hi down to offset lo+1 and
// returns the last event that match accepts; false when none does (or
// retention trimmed the rest of the range).
func lastBefore(j *journal.Journal, hi, lo uint64, match func(journal.Event) bool) (journal.Event, bool, error) {
	const window = journal.DefaultBatch
	for hi > lo {
		from := lo + 1
		if hi-lo > window {
			from = hi - window + 1
		}
		var evs []journal.Event
		for at := from; at <= hi; {
			got, err := j.Read(at, int(hi-at+1))
			if errors.Is(err, journal.ErrTrimmed) {
				var te *journal.TrimmedError
				if errors.As(err, &te) && te.First > at && te.First <= hi {
					at = te.First
					from = te.First
					continue
				}
				break
			}
			if err != nil {
				return journal.Event{}, false, err
			}
			if len(got) == 0 {
				break
			}
			evs = append(evs, got...)
			at = got[len(got)-1].Offset + 1
		}
		for i := len(evs) - 1; i >= 0; i-- {
			if evs[i].Offset <= hi && match(evs[i]) {
				return evs[i], true, nil
			}
		}
		if first, err := firstRetained(j); err != nil {
			return journal.Event{}, false, err
		} else if from <= first {
			return journal.Event{}, false, nil
		}
		hi = from - 1
	}
	return journal.Event{}, false, nil
}

// firstRetained returns the first retained offset, head + 1 when none is.
func firstRetained(j *journal.Journal) (uint64, error) {
	evs, err := j.Read(0, 1)
	if err != nil {
		return 0, err
	}
	if len(evs) == 0 {
		h, err := j.Head()
		return h + 1, err
	}
	return evs[0].Offset, nil
}

// startFor returns the offset of j to start delivering at for the
// published position pos, looking at the events after offset floor only
// (0: all): right after the last event that pos covers,
// so that every change after pos is delivered and, of those before it,
// only what the search cannot rule out. ok false means pos cannot be
// placed in j, and why says why: the caller resyncs.
//
//   - j's resourceVersion, read before its head H, is at or before pos:
//     H + 1 (all j holds is covered).
//   - Otherwise the last event seen on a watch whose RV is at or before
//     pos (CompareResourceVersion; scanning back from the head, the first
//     found, as watch events' RVs grow with offsets): the offset after it.
//     The relist events between it and the next watch event are
//     delivered: their list's RV is unknown, so they may be past pos.
//   - RVs that do not compare: the last watch event whose RV equals pos.
//   - None found after floor > 0: not ok (the caller stays at floor).
//   - None found and nothing trimmed (the first retained offset is 1):
//     1, the whole journal.
//   - None found and retention trimmed j: not ok, the events between pos
//     and the first retained one are gone.
func startFor(j *journal.Journal, pos string, floor uint64) (start uint64, why string, ok bool, err error) {
	rv, err := j.ResourceVersion()
	if err != nil {
		return 0, "", false, err
	}
	head, err := j.Head()
	if err != nil {
		return 0, "", false, err
	}
	if _, err := resourceversion.CompareResourceVersion(pos, pos); err == nil {
		if rv != "" {
			if n, err := resourceversion.CompareResourceVersion(rv, pos); err == nil && n <= 0 {
				return head + 1, "the journal's resourceVersion is at or before the position", true, nil
			}
		}
		e, found, err := lastBefore(j, head, floor, func(e journal.Event) bool {
			if e.Origin != journal.OriginWatch {
				return false
			}
			n, err := resourceversion.CompareResourceVersion(e.ResourceVersion, pos)
			return err == nil && n <= 0
		})
		if err != nil {
			return 0, "", false, err
		}
		if found {
			return e.Offset + 1, "after the last watch event at or before the position, resourceVersion " + e.ResourceVersion, true, nil
		}
	} else {
		e, found, err := lastBefore(j, head, floor, func(e journal.Event) bool {
			return e.Origin == journal.OriginWatch && e.ResourceVersion == pos
		})
		if err != nil {
			return 0, "", false, err
		}
		if found {
			return e.Offset + 1, "after the watch event of the position's resourceVersion (resourceVersions that do not compare)", true, nil
		}
	}
	if floor > 0 {
		return 0, "no watch event at or before the position after offset " + strconv.FormatUint(floor, 10), false, nil
	}
	first, err := firstRetained(j)
	if err != nil {
		return 0, "", false, err
	}
	if first <= 1 {
		return 1, "no watch event at or before the position and nothing trimmed: the whole journal", true, nil
	}
	return 0, "the position is older than this journal's retention (first retained offset " + strconv.FormatUint(first, 10) + ")", false, nil
}

// standbyStart positions the consumer of a new leader (doc.go, "Leader
// election and a warm standby"): right after what the published position
// covers, or after this replica's own commit when that is later; a
// resync when the position cannot be placed. It runs in the feeder before
// its first read.
func (s *Source) standbyStart(ctx context.Context) error {
	sb := s.sb
	var pos, res string
	var found bool
	for {
		var err error
		pos, res, found, err = sb.get(ctx)
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
		sb.mu.Lock()
		sb.pos = pos // publishes never go below where this leader starts
		sb.mu.Unlock()
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
