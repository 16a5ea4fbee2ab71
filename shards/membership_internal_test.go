package shards

import (
	"context"
	"errors"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/utils/ptr"

	"github.com/watchjournal/watchjournal/internal/hashrange"
)

// A Renew that finds another instance's Lease expired but whose Update
// fails (that instance renewed it meanwhile, or a duplicate took it
// first) took nothing over: Previous stays nil, and the takeover that
// lands later records the Lease as it was then.
func TestMembership_Previous_OnlyOnceTheTakeoverLands(t *testing.T) {
	ctx := context.Background()
	first, second := hashrange.Set{{First: 0, Last: 9}}.Selector(), hashrange.Set{{First: 10, Last: 19}}.Selector()
	lease := &coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{Name: "g-a", Namespace: "default", Labels: map[string]string{LabelGroup: "g"},
			Annotations: map[string]string{AnnotationMember: "a", AnnotationSelector: first}},
		Spec: coordinationv1.LeaseSpec{HolderIdentity: ptr.To("a_old"), LeaseDurationSeconds: ptr.To[int32](2),
			RenewTime: ptr.To(metav1.NewMicroTime(time.Now()))},
	}
	cs := fake.NewClientset(lease)
	conflict := true
	cs.PrependReactor("update", "leases", func(k8stesting.Action) (bool, runtime.Object, error) {
		if conflict {
			conflict = false
			return true, nil, apierrors.NewConflict(coordinationv1.Resource("leases"), "g-a", errors.New("renewed meanwhile"))
		}
		return false, nil, nil
	})
	leases := cs.CoordinationV1().Leases("default")
	m := &Membership{opts: MembershipOptions{Group: "g", Member: "a", Namespace: "default", LeaseDuration: 2 * time.Second, RenewInterval: 500 * time.Millisecond},
		leases: leases, lease: "g-a", id: "a_new"}
	t0 := time.Now()
	if _, err := m.Renew(ctx, t0, Announcement{}); !errors.Is(err, ErrLeaseHeld) {
		t.Fatalf("Renew of a Lease first seen = %v; want ErrLeaseHeld", err)
	}
	if _, err := m.Renew(ctx, t0.Add(3*time.Second), Announcement{}); !apierrors.IsConflict(err) {
		t.Fatalf("Renew taking the expired Lease over, its Update conflicting = %v; want a conflict", err)
	}
	if p := m.Previous(); p != nil {
		t.Fatalf("Previous() after a takeover whose Update failed = the Lease showing %q; want nil", p.Annotations[AnnotationSelector])
	}
	// The old instance renewed with another range, then stopped.
	l, err := leases.Get(ctx, "g-a", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	l.Annotations[AnnotationSelector] = second
	l.Spec.RenewTime = ptr.To(metav1.NewMicroTime(t0.Add(3 * time.Second)))
	if _, err := leases.Update(ctx, l, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := m.Renew(ctx, t0.Add(4*time.Second), Announcement{}); !errors.Is(err, ErrLeaseHeld) {
		t.Fatalf("Renew of the Lease just renewed = %v; want ErrLeaseHeld", err)
	}
	if _, err := m.Renew(ctx, t0.Add(7*time.Second), Announcement{}); err != nil {
		t.Fatalf("Renew taking the expired Lease over = %v; want nil", err)
	}
	if p := m.Previous(); p == nil || p.Annotations[AnnotationSelector] != second {
		t.Fatalf("Previous() after the takeover = %v; want the Lease showing %q", p, second)
	}
}
