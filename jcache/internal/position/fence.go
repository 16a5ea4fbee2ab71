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
//   - The term is the leader-election Lease's holderIdentity and
//     leaseTransitions, read when this replica's publisher starts, that is
//     once the manager has been elected. client-go's leader election adds
//     one to leaseTransitions on every acquisition (a renewal keeps it),
//     so a later leader's term is greater.
//   - A write is refused (*FencedError, ErrFenced) when the Lease carries
//     a greater leaseTransitions, or the same with another holder: the
//     writer was deposed. A refused publisher publishes no more.
//   - Every write is an Update carrying the resourceVersion of the copy it
//     read or last wrote; on a conflict the Lease is read again and the
//     term checked again, so a write can neither overwrite a newer term's
//     nor lose one made meanwhile.
//
// What it does not cover: the election Lease is read once, right after
// the election; a replica deposed before that read returns would take its
// successor's term. client-go's lease duration (15 s by default) bounds
// how late that read would have to be.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	coordinationclient "k8s.io/client-go/kubernetes/typed/coordination/v1"
)

// AnnotationTerm is the annotation of the position Lease that holds the
// term of its last writer, as JSON: {"holderIdentity": "...",
// "leaseTransitions": n}.
const AnnotationTerm = "watchjournal.io/leader-term"

// Term is a leader's term: the leader-election Lease's holderIdentity
// and leaseTransitions while it holds it. The zero Term is no term: a
// write under it is not fenced, and a Lease without one fences nothing.
type Term struct {
	Holder      string `json:"holderIdentity"`
	Transitions int32  `json:"leaseTransitions"`
}

// IsZero reports whether t is no term.
func (t Term) IsZero() bool { return t == Term{} }

// String returns "<leaseTransitions>/<holderIdentity>".
func (t Term) String() string { return fmt.Sprintf("%d/%s", t.Transitions, t.Holder) }

// ErrFenced is matched (errors.Is) by a *FencedError: the position Lease
// was written under a newer leader's term than the writer's.
var ErrFenced = errors.New("position: the position Lease carries a newer leader's term")

// FencedError is returned by Lease.Put when the Lease carries a term that
// fences the writer's (a greater leaseTransitions, or the same with
// another holder): the writer was deposed, and nothing is written.
type FencedError struct {
	Lease  string // namespace/name of the position Lease
	Stored Term   // the term on the Lease
	Writer Term   // the term of the refused write
}

// Error names the Lease and both terms.
func (e *FencedError) Error() string {
	return fmt.Sprintf("position: Lease %s was written under leader term %s; refusing the write of term %s (a deposed leader)",
		e.Lease, e.Stored, e.Writer)
}

// Is reports whether target is ErrFenced.
func (e *FencedError) Is(target error) bool { return target == ErrFenced }

// fences reports whether a Lease written under stored refuses a write
// under writer.
func fences(stored, writer Term) bool {
	if stored.IsZero() || writer.IsZero() {
		return false
	}
	if writer.Transitions != stored.Transitions {
		return writer.Transitions < stored.Transitions
	}
	return writer.Holder != stored.Holder
}

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

// ErrNoHolder is returned by ElectionTerm when the leader-election Lease
// has no holder (released, or never acquired).
var ErrNoHolder = errors.New("position: the leader-election Lease has no holder")

// ElectionTerm reads the leader-election Lease name through c and returns
// its term: its holderIdentity and leaseTransitions (0 when unset). It
// returns ErrNoHolder, wrapped, when the Lease has no holderIdentity, and
// the client's error (NotFound among them) when it cannot be read.
func ElectionTerm(ctx context.Context, c coordinationclient.LeaseInterface, name string) (Term, error) {
	l, err := c.Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return Term{}, err
	}
	var t Term
	if l.Spec.HolderIdentity != nil {
		t.Holder = *l.Spec.HolderIdentity
	}
	if t.Holder == "" {
		return Term{}, fmt.Errorf("%w: %s/%s", ErrNoHolder, l.Namespace, l.Name)
	}
	if l.Spec.LeaseTransitions != nil {
		t.Transitions = *l.Spec.LeaseTransitions
	}
	return t, nil
}
