package shards_test

import (
	"context"
	"errors"
	"maps"
	"slices"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/watchjournal/watchjournal/internal/hashrange"
	"github.com/watchjournal/watchjournal/internal/testing/controlplane"
	"github.com/watchjournal/watchjournal/shards"
)

// Ensure Membership keeps one Lease per member and judges the others by
// the local times it is given: two members see each other live with what
// they publish; a second instance of a member's name is refused while the
// first renews; a leaving member drops out of the others' view; a Lease
// released is taken by the next instance, created anew without the index
// manifest; a Lease not renewed for its duration, as the viewer saw it,
// is gone; a leaving mark is lifted by a renewal without it.
func TestMembership_RenewViewRelease(t *testing.T) {
	cp := controlplane.StartT(t, controlplane.Options{})
	cfg := cp.RESTConfig()
	leases := kubernetes.NewForConfigOrDie(cfg).CoordinationV1().Leases("default")
	ctx := context.Background()
	open := func(member string) *shards.Membership {
		t.Helper()
		m, err := shards.NewMembership(cfg, shards.MembershipOptions{Group: "g", Member: member, Namespace: "default",
			LeaseDuration: 2 * time.Second, RenewInterval: 500 * time.Millisecond})
		if err != nil {
			t.Fatal(err)
		}
		return m
	}
	renew := func(m *shards.Membership, now time.Time, a shards.Announcement, wantCreated bool) {
		t.Helper()
		created, err := m.Renew(ctx, now, a)
		if err != nil || created != wantCreated {
			t.Fatalf("Renew(%+v) = %v, %v; want %v, nil", a, created, err, wantCreated)
		}
	}
	view := func(m *shards.Membership, now time.Time, live []string, selectors map[string]string, gone []string) {
		t.Helper()
		v, err := m.View(ctx, now)
		if err != nil {
			t.Fatal(err)
		}
		var g []string
		for _, l := range v.Gone {
			g = append(g, l.Annotations[shards.AnnotationMember])
		}
		if !slices.Equal(v.Live, live) || !maps.Equal(v.Selectors, selectors) || !slices.Equal(g, gone) {
			t.Fatalf("View = live %v, selectors %v, gone %v; want %v, %v, %v", v.Live, v.Selectors, g, live, selectors, gone)
		}
	}
	half := hashrange.Full().Selector() // what a publishes: any selector, carried as is

	t0 := time.Now()
	a, b := open("a"), open("b")
	if !a.Lapsed(t0) {
		t.Error("Lapsed before any renewal = false; want true")
	}
	renew(a, t0, shards.Announcement{Selector: half}, true)
	renew(a, t0, shards.Announcement{Selector: half, Index: "manifest"}, false)
	renew(b, t0, shards.Announcement{}, true)
	if a.Lapsed(t0.Add(time.Second)) || !a.Lapsed(t0.Add(2*time.Second)) {
		t.Errorf("Lapsed 1s, 2s after the renewal = %v, %v; want false, true", a.Lapsed(t0.Add(time.Second)), a.Lapsed(t0.Add(2*time.Second)))
	}
	view(a, t0, []string{"a", "b"}, map[string]string{"a": half}, nil)

	a2 := open("a")
	if _, err := a2.Renew(ctx, t0, shards.Announcement{}); !errors.Is(err, shards.ErrLeaseHeld) {
		t.Fatalf("Renew of a second instance of a = %v; want ErrLeaseHeld", err)
	}

	renew(b, t0, shards.Announcement{Leaving: true}, false)
	view(a, t0, []string{"a"}, map[string]string{"a": half}, nil)
	view(b, t0, []string{"a", "b"}, map[string]string{"a": half}, nil) // b judges itself by Renew

	if err := a.Release(ctx); err != nil {
		t.Fatalf("Release = %v; want nil", err)
	}
	view(b, t0, []string{"b"}, map[string]string{}, nil)
	renew(a2, t0, shards.Announcement{Selector: half, Index: "manifest"}, true)
	if l, err := leases.Get(ctx, "g-a", metav1.GetOptions{}); err != nil {
		t.Fatal(err)
	} else if mf, ok := l.Annotations[shards.AnnotationIndex]; ok {
		t.Errorf("a created Lease carries the index manifest %q; want none (its chunks went with the old Lease)", mf)
	}
	if err := a.Release(ctx); !errors.Is(err, shards.ErrLeaseHeld) {
		t.Errorf("Release by the first instance after the second took the Lease = %v; want ErrLeaseHeld", err)
	}

	// b's Lease is judged by a2's clock alone: a leaving mark keeps it out
	// of the view; renewed without it, b is live from the time a2 saw the
	// renewal, and gone a Lease duration later, whatever renewTime says.
	view(a2, t0.Add(time.Second), []string{"a"}, map[string]string{"a": half}, nil)
	renew(b, t0.Add(2*time.Second), shards.Announcement{}, false)
	view(a2, t0.Add(2*time.Second), []string{"a", "b"}, map[string]string{"a": half}, nil)
	renew(a2, t0.Add(3*time.Second), shards.Announcement{Selector: half}, false) // a2's own range stays published
	view(a2, t0.Add(4*time.Second), []string{"a"}, map[string]string{"a": half}, []string{"b"})
}
