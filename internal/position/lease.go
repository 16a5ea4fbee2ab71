package position

// The position Lease, its publisher (the leader) and its follower (the
// standbys).
//
// The Lease is one of the operator's own, never the leader-election
// Lease: client-go's LeaseLock updates that one from the copy it last
// read, so a foreign write would make its renew conflict. What the
// annotations hold is the caller's (crsource: one position; jcache: one
// per source of a controller).

import (
	"context"
	"maps"
	"time"

	"github.com/go-logr/logr"
	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	coordinationclient "k8s.io/client-go/kubernetes/typed/coordination/v1"

	"github.com/watchjournal/watchjournal/journal"
)

// DefaultInterval is the default least time between two publishes, and
// the follower's period.
const DefaultInterval = 5 * time.Second

// Lease reads and writes the annotations of the position Lease.
// Only the publisher writes; it keeps the Lease it last wrote, so a
// publish is one Update (a conflict reads it again).
type Lease struct {
	Client    coordinationclient.LeaseInterface // of Namespace
	Namespace string
	Name      string
	Identity  string // written as holderIdentity

	written *coordinationv1.Lease // as last written, nil when unknown
}

// String returns "namespace/name".
func (l *Lease) String() string { return l.Namespace + "/" + l.Name }

// Get returns the Lease's annotations, false when there is no Lease.
func (l *Lease) Get(ctx context.Context) (map[string]string, bool, error) {
	got, err := l.Client.Get(ctx, l.Name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, err
	}
	return got.Annotations, true, nil
}

// Put writes ann into the Lease's annotations (other annotations are
// kept), with holderIdentity and renewTime, creating the Lease when
// missing.
func (l *Lease) Put(ctx context.Context, ann map[string]string) error {
	now := metav1.NewMicroTime(time.Now())
	fill := func(o *coordinationv1.Lease) {
		if o.Annotations == nil {
			o.Annotations = map[string]string{}
		}
		maps.Copy(o.Annotations, ann)
		id := l.Identity
		o.Spec.HolderIdentity = &id
		o.Spec.RenewTime = &now
	}
	for try := 0; ; try++ {
		o, err := l.written, error(nil)
		if o == nil {
			o, err = l.Client.Get(ctx, l.Name, metav1.GetOptions{})
		}
		var out *coordinationv1.Lease
		if apierrors.IsNotFound(err) {
			o = &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: l.Name, Namespace: l.Namespace}}
			fill(o)
			out, err = l.Client.Create(ctx, o, metav1.CreateOptions{})
		} else if err == nil {
			o = o.DeepCopy()
			fill(o)
			out, err = l.Client.Update(ctx, o, metav1.UpdateOptions{})
		}
		l.written = out
		if err == nil || try >= 2 || !(apierrors.IsConflict(err) || apierrors.IsAlreadyExists(err) || apierrors.IsNotFound(err)) {
			return err
		}
	}
}

// Publisher writes the leader's positions on the Lease: when they moved
// (Signal), at most every Interval, or earlier once Commits commits were
// noted; on every Interval tick after Refresh (a quiet resource's
// position follows bookmarks); and once more when its context ends,
// after Stopped (the sources' final commits, waited for at most 10 s).
type Publisher struct {
	Lease    *Lease
	Signal   *Signal
	Interval time.Duration // DefaultInterval when 0
	Commits  int           // > 0: publish after that many commits, before Interval
	Log      logr.Logger
	// Annotations returns what to write; nil or empty: nothing known yet.
	Annotations func() map[string]string
	// Refresh recomputes the positions from the committed offsets (each
	// tick); may be nil.
	Refresh func()
	// Stopped returns once the sources made their final commit, or ctx is
	// done; may be nil.
	Stopped func(ctx context.Context)
}

// Run publishes until ctx is done, then once more (see Publisher).
// controller-runtime stops leader-election Runnables before it releases
// the election Lease, so the next leader reads the final positions.
func (p *Publisher) Run(ctx context.Context) error {
	interval := p.Interval
	if interval <= 0 {
		interval = DefaultInterval
	}
	var last map[string]string
	var lastAt time.Time
	publish := func(ctx context.Context) {
		ann := p.Annotations()
		if len(ann) == 0 || maps.Equal(ann, last) {
			return
		}
		if err := p.Lease.Put(ctx, ann); err != nil {
			if ctx.Err() == nil {
				p.Log.Error(err, "publishing the position failed", "lease", p.Lease.String(), "position", ann)
			}
			return
		}
		last, lastAt = ann, time.Now()
		p.Signal.mu.Lock()
		p.Signal.commits = 0
		p.Signal.mu.Unlock()
	}
	timer := time.NewTimer(interval)
	defer timer.Stop()
	for {
		select {
		case <-ctx.Done():
			// Bounded: a stuck source costs the next leader a longer
			// replay, never a lost event.
			if p.Stopped != nil {
				sctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
				p.Stopped(sctx)
				cancel()
			}
			fctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			publish(fctx)
			cancel()
			return nil
		case <-p.Signal.moved:
			p.Signal.mu.Lock()
			many := p.Commits > 0 && p.Signal.commits >= p.Commits
			p.Signal.mu.Unlock()
			if wait := interval - time.Since(lastAt); !many && wait > 0 {
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
			if p.Refresh != nil {
				p.Refresh()
			}
			publish(ctx)
			timer.Reset(interval)
		}
	}
}

// Follower moves one standby consumer behind a published position: Step
// commits it up to the events of its journal the position covers, only
// past its commit, and does nothing when the position and the head have
// not changed since the last Step.
type Follower struct {
	Journal *journal.Journal
	// Committed returns the consumer's committed offset (0 with no
	// consumer).
	Committed func() (uint64, error)
	// Commit commits the consumer at offset p (creating it when needed),
	// unless the source started on this replica meanwhile.
	Commit func(p uint64) error
	Log    logr.Logger

	lastPos  string
	lastHead uint64
}

// Step follows pos once.
func (f *Follower) Step(pos string) {
	if pos == "" {
		return
	}
	head, err := f.Journal.Head()
	if err != nil || (pos == f.lastPos && head == f.lastHead) {
		return
	}
	f.lastPos, f.lastHead = pos, head
	c, err := f.Committed()
	if err != nil {
		return
	}
	start, _, ok, err := StartFor(f.Journal, pos, c)
	if err != nil || !ok || start-1 <= c {
		return
	}
	if err := f.Commit(start - 1); err != nil && !errorsIsClosed(err) {
		f.Log.Error(err, "following the leader's position failed", "offset", start-1)
	}
}

// Follow reads the Lease every interval (DefaultInterval when 0) and
// calls step with its annotations, until ctx is done or step returns
// false (the source started on this replica).
func Follow(ctx context.Context, l *Lease, interval time.Duration, step func(ann map[string]string) bool) {
	if interval <= 0 {
		interval = DefaultInterval
	}
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		ann, ok, err := l.Get(ctx)
		if err != nil || !ok {
			continue
		}
		if !step(ann) {
			return
		}
	}
}
