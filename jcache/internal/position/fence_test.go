package position

import (
	"context"
	"errors"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	"github.com/watchjournal/watchjournal/internal/testing/controlplane"
)

// On one election Lease (the same UID) terms are ordered by
// leaseTransitions, and a write is refused under an older term or the
// same term of another holder; terms of two Leases, or a stored term
// without a UID, are not ordered.
func TestOrder(t *testing.T) {
	b1, c1 := Term{"b", 1, "uid1"}, Term{"c", 1, "uid1"}
	for _, tc := range []struct {
		name               string
		stored, w          Term
		fenced, comparable bool
	}{
		{"the same term", b1, b1, false, true},
		{"a newer term", Term{"a", 0, "uid1"}, b1, false, true},
		{"an older term", b1, Term{"a", 0, "uid1"}, true, true},
		{"the same transitions, another holder", b1, c1, true, true},
		{"another Lease, fewer transitions", Term{"a", 5, "uid1"}, Term{"b", 0, "uid2"}, false, false},
		{"another Lease, more transitions", Term{"b", 0, "uid2"}, Term{"a", 5, "uid1"}, false, false},
		{"a stored term without a UID", Term{"a", 5, ""}, Term{"b", 6, "uid1"}, false, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if fenced, comparable := order(tc.stored, tc.w); fenced != tc.fenced || comparable != tc.comparable {
				t.Errorf("order(%+v, %+v) = %v, %v; want %v, %v", tc.stored, tc.w, fenced, comparable, tc.fenced, tc.comparable)
			}
		})
	}
}

// The election Lease, read again, is held under the writer's term when
// it names the same holder, with the same leaseTransitions on the same
// Lease or on a Lease re-created since; terms are never ordered.
func TestLeads(t *testing.T) {
	a5 := Term{"a", 5, "uid1"}
	for _, tc := range []struct {
		name   string
		now, w Term
		want   bool
	}{
		{"the writer's term", a5, a5, true},
		{"renewed: same holder, same transitions", Term{"a", 5, "uid1"}, a5, true},
		{"another holder elected on the same Lease", Term{"b", 6, "uid1"}, a5, false},
		{"the writer again, after another holder", Term{"a", 7, "uid1"}, a5, false},
		{"a re-created Lease, another holder at 0", Term{"b", 0, "uid2"}, a5, false},
		{"a re-created Lease, held by the writer's holder", Term{"a", 0, "uid2"}, a5, true},
		{"no holder (released)", Term{}, a5, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := leads(tc.now, tc.w); got != tc.want {
				t.Errorf("leads(%+v, %+v) = %v; want %v", tc.now, tc.w, got, tc.want)
			}
		})
	}
}

// Against the real apiserver: leader a publishes under its term; b is
// elected (the election Lease's holder and leaseTransitions change) and
// publishes under its own; a's late publish, from the copy it last wrote,
// is refused with a *FencedError naming both terms, and b's position
// stands. A second writer of b's term, from a copy b's writes made stale,
// reads the Lease again and writes (optimistic concurrency, nothing lost).
func TestLease_Put_DeposedLeaderFenced(t *testing.T) {
	cp := controlplane.StartT(t, controlplane.Options{})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	kube := kubernetes.NewForConfigOrDie(cp.RESTConfig())
	const ns = "fence"
	if _, err := kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	leases := kube.CoordinationV1().Leases(ns)
	elect := func(holder string) Term {
		t.Helper()
		l, err := leases.Get(ctx, "leader", metav1.GetOptions{})
		if err != nil {
			l, err = leases.Create(ctx, &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: "leader"},
				Spec: coordinationv1.LeaseSpec{HolderIdentity: ptr.To(holder), LeaseTransitions: ptr.To[int32](0)}}, metav1.CreateOptions{})
		} else { // as client-go's leader election acquires it
			l.Spec.HolderIdentity = ptr.To(holder)
			l.Spec.LeaseTransitions = ptr.To(*l.Spec.LeaseTransitions + 1)
			l, err = leases.Update(ctx, l, metav1.UpdateOptions{})
		}
		if err != nil {
			t.Fatal(err)
		}
		term, err := (&Election{Client: leases, Namespace: ns, Name: l.Name}).Term(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return term
	}
	writer := func(id string) *Lease {
		return &Lease{Client: leases, Namespace: ns, Name: "position", Identity: id,
			Election: &Election{Client: leases, Namespace: ns, Name: "leader"}}
	}
	published := func() (map[string]string, string) {
		t.Helper()
		l, err := leases.Get(ctx, "position", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return l.Annotations, *l.Spec.HolderIdentity
	}

	a, termA := writer("a"), elect("a-uid")
	if err := a.Put(ctx, map[string]string{"p": "10"}, termA); err != nil {
		t.Fatalf("a's publish under %v: %v", termA, err)
	}
	b, termB := writer("b"), elect("b-uid")
	if termB.Transitions <= termA.Transitions {
		t.Fatalf("b's term %v; want leaseTransitions past a's %v", termB, termA)
	}
	if err := b.Put(ctx, map[string]string{"p": "20"}, termB); err != nil {
		t.Fatalf("b's publish under %v: %v", termB, err)
	}

	err := a.Put(ctx, map[string]string{"p": "15"}, termA)
	var fe *FencedError
	if !errors.As(err, &fe) || !errors.Is(err, ErrFenced) || fe.Stored != termB || fe.Writer != termA || fe.Read {
		t.Fatalf("a's late publish = %v; want a *FencedError (ErrFenced) with Stored %v, Writer %v, the election Lease not read", err, termB, termA)
	}
	if ann, holder := published(); ann["p"] != "20" || holder != "b" {
		t.Fatalf("after a's late publish the Lease holds p=%q by %q; want b's p=20", ann["p"], holder)
	}

	// Another writer of b's term (b's publisher after a restart of its
	// client) first reads the Lease; then b writes from the copy it
	// holds, which is stale: it reads again and writes, keeping c's.
	b2 := writer("b")
	if err := b2.Put(ctx, map[string]string{"c": "1"}, termB); err != nil {
		t.Fatal(err)
	}
	if err := b.Put(ctx, map[string]string{"p": "30"}, termB); err != nil {
		t.Fatalf("b's publish from a stale copy, same term: %v; want it read again and written", err)
	}
	if ann, _ := published(); ann["p"] != "30" || ann["c"] != "1" {
		t.Fatalf("the Lease holds %v; want p=30 and c=1", ann)
	}
}

// Against the real apiserver: the election Lease is deleted and created
// again (kubectl delete lease; a renamed LeaderElectionID is alike), so
// leaseTransitions start again at 0 while the position Lease still
// carries the old Lease's term 5/a. b, elected on the new Lease, publishes
// over it; a's late publish, under a greater leaseTransitions of a Lease
// that no longer exists, is refused naming b's term as the election
// Lease's. With no election Lease at all, a's write fails with NotFound,
// is not fenced (the publisher tries again later), and writes nothing.
func TestLease_Put_ElectionLeaseRecreated(t *testing.T) {
	cp := controlplane.StartT(t, controlplane.Options{})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	kube := kubernetes.NewForConfigOrDie(cp.RESTConfig())
	const ns = "refence"
	if _, err := kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	leases := kube.CoordinationV1().Leases(ns)
	election := &Election{Client: leases, Namespace: ns, Name: "leader"}
	elect := func(holder string, transitions int32) Term {
		t.Helper()
		if _, err := leases.Create(ctx, &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: "leader"},
			Spec: coordinationv1.LeaseSpec{HolderIdentity: ptr.To(holder), LeaseTransitions: ptr.To(transitions)}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		term, err := election.Term(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return term
	}
	writer := func(id string) *Lease {
		return &Lease{Client: leases, Namespace: ns, Name: "position", Identity: id, Election: election}
	}
	published := func() (string, string) {
		t.Helper()
		l, err := leases.Get(ctx, "position", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return l.Annotations["p"], *l.Spec.HolderIdentity
	}

	a, termA := writer("a"), elect("a-uid", 5)
	if err := a.Put(ctx, map[string]string{"p": "10"}, termA); err != nil {
		t.Fatalf("a's publish under %v: %v", termA, err)
	}
	if err := leases.Delete(ctx, "leader", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}

	// An election Lease without a holder (re-applied empty before the
	// leader's next renewal) names no leader: a publish over the term of
	// another Lease is not fenced for good, it fails with ErrNoHolder and
	// is tried again later.
	early := elect("b-uid", 0)
	if err := leases.Delete(ctx, "leader", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := leases.Create(ctx, &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: "leader"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := writer("b").Put(ctx, map[string]string{"p": "12"}, early); !errors.Is(err, ErrNoHolder) || errors.Is(err, ErrFenced) {
		t.Fatalf("b's publish under %v with a holderless election Lease = %v; want ErrNoHolder, not fenced", early, err)
	}
	if p, holder := published(); p != "10" || holder != "a" {
		t.Fatalf("after b's publish with a holderless election Lease the Lease holds p=%q by %q; want a's p=10", p, holder)
	}
	if err := leases.Delete(ctx, "leader", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}

	b, termB := writer("b"), elect("b-uid", 0)
	if termB.UID == termA.UID || termB.UID == "" {
		t.Fatalf("the re-created election Lease has UID %q; want one other than the first's %q", termB.UID, termA.UID)
	}
	if err := b.Put(ctx, map[string]string{"p": "20"}, termB); err != nil {
		t.Fatalf("b's publish under %v over a's %v of the deleted election Lease: %v; want it written", termB, termA, err)
	}
	if p, holder := published(); p != "20" || holder != "b" {
		t.Fatalf("after b's publish the Lease holds p=%q by %q; want b's p=20", p, holder)
	}

	err := a.Put(ctx, map[string]string{"p": "15"}, termA)
	var fe *FencedError
	if !errors.As(err, &fe) || fe.Stored != termB || fe.Writer != termA || !fe.Read || fe.Current != termB {
		t.Fatalf("a's late publish = %v; want a *FencedError with Stored %v, Writer %v, the election Lease read at %v", err, termB, termA, termB)
	}
	if p, holder := published(); p != "20" || holder != "b" {
		t.Fatalf("after a's late publish the Lease holds p=%q by %q; want b's p=20", p, holder)
	}

	if err := leases.Delete(ctx, "leader", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	err = a.Put(ctx, map[string]string{"p": "16"}, termA)
	if !apierrors.IsNotFound(err) || errors.Is(err, ErrFenced) {
		t.Fatalf("a's publish with no election Lease = %v; want NotFound, not fenced", err)
	}
	if p, holder := published(); p != "20" || holder != "b" {
		t.Fatalf("after a's publish with no election Lease the Lease holds p=%q by %q; want b's p=20", p, holder)
	}
}
