package position

import (
	"context"
	"errors"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	"github.com/watchjournal/watchjournal/internal/testing/controlplane"
)

// A write is refused under an older term, or the same term of another
// holder; allowed under the same or a newer term, and when either side
// has no term.
func TestFences(t *testing.T) {
	a0, b1, c1 := Term{"a", 0}, Term{"b", 1}, Term{"c", 1}
	for _, tc := range []struct {
		name           string
		stored, writer Term
		want           bool
	}{
		{"same term", b1, b1, false},
		{"newer term", a0, b1, false},
		{"older term", b1, a0, true},
		{"same transitions, another holder", b1, c1, true},
		{"no term on the Lease", Term{}, a0, false},
		{"a write without a term", b1, Term{}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := fences(tc.stored, tc.writer); got != tc.want {
				t.Errorf("fences(%v, %v) = %v; want %v", tc.stored, tc.writer, got, tc.want)
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
		term, err := ElectionTerm(ctx, leases, l.Name)
		if err != nil {
			t.Fatal(err)
		}
		return term
	}
	writer := func(id string) *Lease {
		return &Lease{Client: leases, Namespace: ns, Name: "position", Identity: id}
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
	if !errors.As(err, &fe) || !errors.Is(err, ErrFenced) || fe.Stored != termB || fe.Writer != termA {
		t.Fatalf("a's late publish = %v; want a *FencedError (ErrFenced) with Stored %v, Writer %v", err, termB, termA)
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
