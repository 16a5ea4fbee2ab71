package position

// Fencing of the position Lease by the leader-election term.
//
// A leader that lost its election without knowing it yet (a partition,
// a stalled process) may still publish, and its final publish on stop
// comes after its successor's start: written last, its older positions
// would stand, and the leader after the next failover would start from
// them. So each publish carries the term of the leader that writes it,
// and the Lease keeps the term of its last writer (AnnotationTerm):
//
//   - The term is the leader-election Lease's holderIdentity,
//     leaseTransitions and UID, read when this replica's publisher starts,
//     that is once the manager has been elected (Election.Term).
//   - On one election Lease (the same UID) terms are ordered:
//     client-go's leader election adds one to leaseTransitions on every
//     acquisition by another holder (a renewal keeps it). A write under
//     a term the Lease's is not behind proceeds; one under an older term,
//     or the same leaseTransitions of another holder, is refused
//     (*FencedError, ErrFenced): the writer was deposed.
//   - Terms of two election Leases are not ordered: leaseTransitions
//     start again at 0 on a Lease deleted and created again (kubectl
//     delete lease) or renamed (LeaderElectionID, LeaderElectionNamespace),
//     and a stored term without a UID names no Lease. Then the election
//     Lease, read again, decides (leads): the write proceeds when it is
//     held under the writer's term (the same holder, and the same
//     leaseTransitions of the same Lease, or a Lease created since that
//     the same holder holds: client-go's renewal re-creates a deleted
//     Lease under its holder), else it is refused. So the term of a Lease
//     that no longer exists fences no new leader, and a deposed leader's
//     late write is still refused: the election Lease names another
//     holder. A missing or unreadable election Lease (deleted, not yet
//     created again by the leader's next renewal), or one without a
//     holder (ErrNoHolder), fences nothing: the write fails with that
//     error and the publisher tries again later.
//   - A refused publisher publishes no more.
//   - Every write is an Update carrying the resourceVersion of the copy it
//     read or last wrote; on a conflict the Lease is read again and the
//     term checked again, so a write can neither overwrite a newer term's
//     nor lose one made meanwhile.
//
// What it does not cover: a deposed leader whose successor has not
// published yet still writes over its own term or an older one of the
// same Lease (nothing is read then), or just after its read of the
// election Lease; and the election Lease is read once, right after the
// election, so a replica deposed before that read returns would take its
// successor's term. The successor's first publish ends the first window;
// client-go's lease duration (15 s by default) bounds the others.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	coordinationclient "k8s.io/client-go/kubernetes/typed/coordination/v1"
)

// AnnotationTerm is the annotation of the position Lease that holds the
// term of its last writer, as JSON: {"holderIdentity": "...",
// "leaseTransitions": n, "uid": "..."} ("uid" absent on terms written
// without it).
const AnnotationTerm = "watchjournal.io/leader-term"

// Term is a leader's term: the leader-election Lease's holderIdentity and
// leaseTransitions while it holds it, and the UID of that Lease. The zero
// Term is no term: a write under it is not fenced, and a Lease without
// one fences nothing.
type Term struct {
	Holder      string    `json:"holderIdentity"`
	Transitions int32     `json:"leaseTransitions"`
	UID         types.UID `json:"uid,omitempty"`
}

// IsZero reports whether t is no term.
func (t Term) IsZero() bool { return t == Term{} }

// String returns "<leaseTransitions>/<holderIdentity>", the UID left out.
func (t Term) String() string { return fmt.Sprintf("%d/%s", t.Transitions, t.Holder) }

// order compares the terms stored and w of one election Lease:
// comparable is false when they are not known to be of one Lease (UIDs
// differ or are missing); else fenced reports whether stored refuses a
// write under w.
func order(stored, w Term) (fenced, comparable bool) {
	if stored.UID == "" || stored.UID != w.UID {
		return false, false
	}
	if w.Transitions != stored.Transitions {
		return w.Transitions < stored.Transitions, true
	}
	return w.Holder != stored.Holder, true
}

// leads reports whether the election Lease, whose term is now, is still
// held under w: by the same holder, with the same leaseTransitions when
// it is the same Lease.
func leads(now, w Term) bool {
	if now.Holder == "" || now.Holder != w.Holder {
		return false
	}
	return now.UID != w.UID || now.Transitions == w.Transitions
}

// ErrFenced is matched (errors.Is) by a *FencedError: the writer of the
// position Lease no longer holds the leader-election Lease.
var ErrFenced = errors.New("position: the writer no longer holds the leader-election Lease")

// FencedError is returned by Lease.Put when the writer was deposed (see
// the top of fence.go): the Lease carries a later term of the same
// election Lease, or a term of another one and the election Lease, read
// again (Read), is not held under the writer's. Nothing is written.
type FencedError struct {
	Lease   string // namespace/name of the position Lease
	Stored  Term   // the term on the position Lease
	Writer  Term   // the term of the refused write
	Read    bool   // the election Lease was read: the terms are of two Leases
	Current Term   // the election Lease's term when Read
}

// Error names the Lease and the terms.
func (e *FencedError) Error() string {
	if !e.Read {
		return fmt.Sprintf("position: Lease %s was written under leader term %s, later on the same leader-election Lease; refusing the write of term %s (a deposed leader)",
			e.Lease, e.Stored, e.Writer)
	}
	return fmt.Sprintf("position: Lease %s was written under leader term %s of another leader-election Lease, and the leader-election Lease is held under term %s; refusing the write of term %s (a deposed leader)",
		e.Lease, e.Stored, e.Current, e.Writer)
}

// Is reports whether target is ErrFenced.
func (e *FencedError) Is(target error) bool { return target == ErrFenced }

// termOf returns the term the Lease o was last written under, the zero
// Term when it has none.
func termOf(o *coordinationv1.Lease) (Term, error) {
	raw := o.Annotations[AnnotationTerm]
	if raw == "" {
		return Term{}, nil
	}
	var t Term
	if err := json.Unmarshal([]byte(raw), &t); err != nil {
		return Term{}, fmt.Errorf("position: annotation %s of Lease %s/%s: %w", AnnotationTerm, o.Namespace, o.Name, err)
	}
	return t, nil
}

// ErrNoHolder is returned by Election.Term when the leader-election Lease
// has no holder (released, or never acquired).
var ErrNoHolder = errors.New("position: the leader-election Lease has no holder")

// Election is the manager's leader-election Lease, the source of truth
// of who leads (see the top of this file).
type Election struct {
	Client    coordinationclient.LeaseInterface // of Namespace
	Namespace string
	Name      string
}

// String returns "namespace/name".
func (e *Election) String() string { return e.Namespace + "/" + e.Name }

// Term reads the election Lease and returns its term: its holderIdentity,
// leaseTransitions (0 when unset) and UID. It returns ErrNoHolder,
// wrapped, when the Lease has no holderIdentity, and the client's error
// (NotFound among them) when it cannot be read.
func (e *Election) Term(ctx context.Context) (Term, error) {
	l, err := e.Client.Get(ctx, e.Name, metav1.GetOptions{})
	if err != nil {
		return Term{}, err
	}
	t := Term{UID: l.UID}
	if l.Spec.HolderIdentity != nil {
		t.Holder = *l.Spec.HolderIdentity
	}
	if t.Holder == "" {
		return Term{}, fmt.Errorf("%w: %s", ErrNoHolder, e)
	}
	if l.Spec.LeaseTransitions != nil {
		t.Transitions = *l.Spec.LeaseTransitions
	}
	return t, nil
}
