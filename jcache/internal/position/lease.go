package position

// The position Lease and the follower of a standby's consumer.
//
// The Lease is one of the operator's own, never the leader-election
// Lease: client-go's LeaseLock updates that one from the copy it last
// read, so a foreign write would make its renew conflict. What the
// annotations hold is the caller's (jcache: one
// per source of a controller).

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"sync"
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
// publish is one Update carrying that copy's resourceVersion (a conflict
// reads it again, and checks the term again: fence.go).
type Lease struct {
	Client    coordinationclient.LeaseInterface // of Namespace
	Namespace string
	Name      string
	Identity  string // written as holderIdentity
	// Election is read again by a write over a term of another election
	// Lease (fence.go); nil: such a write fails.
	Election *Election

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
// kept), with holderIdentity, renewTime and term (AnnotationTerm),
// creating the Lease when missing. It returns a *FencedError (ErrFenced)
// and writes nothing when the writer of term was deposed: the Lease
// carries a later term of the same election Lease, or a term of another
// and Election, read again, is not held under term; and the error of
// that read when it fails (fence.go). The
// zero term is not fenced and leaves the Lease's term as it is. A
// conflict (another write since the copy it holds) reads the Lease
// again, twice at most, then returns the conflict.
func (l *Lease) Put(ctx context.Context, ann map[string]string, term Term) error {
	now := metav1.NewMicroTime(time.Now())
	var stamp string
	if !term.IsZero() {
		b, err := json.Marshal(term)
		if err != nil {
			return fmt.Errorf("position: %w", err)
		}
		stamp = string(b)
	}
	fill := func(o *coordinationv1.Lease) {
		if o.Annotations == nil {
			o.Annotations = map[string]string{}
		}
		maps.Copy(o.Annotations, ann)
		if stamp != "" {
			o.Annotations[AnnotationTerm] = stamp
		}
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
			stored, terr := termOf(o)
			if terr != nil {
				l.written = nil
				return terr
			}
			if err := l.admit(ctx, stored, term); err != nil {
				l.written = nil
				return err
			}
			o = o.DeepCopy() // its resourceVersion makes the Update conditional
			fill(o)
			out, err = l.Client.Update(ctx, o, metav1.UpdateOptions{})
		}
		if err != nil {
			out = nil // client-go returns an empty object with an error: read the Lease again
		}
		l.written = out
		if err == nil || try >= 2 || !(apierrors.IsConflict(err) || apierrors.IsAlreadyExists(err) || apierrors.IsNotFound(err)) {
			return err
		}
	}
}

// admit returns nil when a write under w may replace the Lease's write
// under stored: w is no term, the Lease has none or w, w is not behind
// it on one election Lease, or, for terms of two Leases, the election
// Lease is still held under w (fence.go). Otherwise a *FencedError, or
// the error of reading the election Lease.
func (l *Lease) admit(ctx context.Context, stored, w Term) error {
	if w.IsZero() || stored.IsZero() || stored == w {
		return nil
	}
	fenced := &FencedError{Lease: l.String(), Stored: stored, Writer: w}
	if refused, ok := order(stored, w); ok {
		if refused {
			return fenced
		}
		return nil
	}
	if l.Election == nil {
		return fmt.Errorf("position: Lease %s carries term %s, not known to be of the writer's leader-election Lease, and no Election to read: refusing the write of term %s", l, stored, w)
	}
	fenced.Read = true
	now, err := l.Election.Term(ctx)
	if err != nil { // ErrNoHolder too: the next holder's term decides, read again later
		return fmt.Errorf("position: reading the leader-election Lease %s to write over term %s of another election Lease on Lease %s: %w", l.Election, stored, l, err)
	}
	if !leads(now, w) {
		fenced.Current = now
		return fenced
	}
	return nil
}

// Follower moves one standby consumer behind a published position: Step
// commits it up to the events of its journal the position covers (creating
// it when needed), only past its commit, and does nothing when the
// position and the head have not changed since the last Step.
type Follower struct {
	Name     string // the consumer, the key of its entry
	Resource string // Resource of Journal: entries of another are not followed
	Journal  *journal.Journal
	// Mu guards *Started, true once the source started on this replica:
	// then the follower does not touch its consumer any more.
	Mu      sync.Locker
	Started *bool
	Log     logr.Logger

	commit   func(p uint64) error // nil: commitLocked (tests count commits)
	lastPos  string
	lastHead uint64
}

func (f *Follower) started() bool {
	f.Mu.Lock()
	defer f.Mu.Unlock()
	return *f.Started
}

// commitLocked commits the consumer at offset p, creating it when
// missing, unless the source started meanwhile.
func (f *Follower) commitLocked(p uint64) error {
	f.Mu.Lock()
	defer f.Mu.Unlock()
	if *f.Started {
		return nil
	}
	err := f.Journal.Consumers().Commit(f.Name, p)
	if errors.Is(err, journal.ErrNoConsumer) {
		err = f.Journal.Consumers().Create(f.Name, p+1)
	}
	return err
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
	c, err := f.Journal.Consumers().Committed(f.Name)
	if errors.Is(err, journal.ErrNoConsumer) {
		c, err = 0, nil
	}
	if err != nil {
		return
	}
	start, _, ok, err := StartFor(f.Journal, pos, c)
	if err != nil || !ok || start-1 <= c {
		return
	}
	commit := f.commit
	if commit == nil {
		commit = f.commitLocked
	}
	if err := commit(start - 1); err != nil && !errors.Is(err, journal.ErrClosed) {
		f.Log.Error(err, "following the leader's position failed", "offset", start-1)
	}
}
