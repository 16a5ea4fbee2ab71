package shards_test

import (
	"context"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/go-logr/logr/testr"
	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes"

	"github.com/watchjournal/watchjournal/internal/testing/controlplane"
	"github.com/watchjournal/watchjournal/journal"
	"github.com/watchjournal/watchjournal/reconcile"
	"github.com/watchjournal/watchjournal/shards"
)

// Leases are judged by this replica's clock: a peer
// whose clock is an hour behind and keeps renewing is live; a peer whose
// clock is an hour ahead and stops renewing is dead a Lease duration
// later, not an hour later.
func TestMember_PeerClockSkew(t *testing.T) {
	cp := controlplane.StartT(t, controlplane.Options{})
	cfg := cp.RESTConfig()
	leases := kubernetes.NewForConfigOrDie(cfg).CoordinationV1().Leases("default")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	res := journal.Resource{GVR: schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}, Namespace: "default"}
	m, err := shards.Open(cfg, filepath.Join(t.TempDir(), "cm.db"), res, shards.Options{
		Group: "g", Member: "solo", LeaseDuration: 2 * time.Second, RenewInterval: 500 * time.Millisecond,
		LeaveTimeout: -1, Logger: testr.New(t),
	})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	done := make(chan error, 1)
	go func() { done <- m.Run(ctx) }()
	defer func() { cancel(); <-done }()
	waitMember(t, m, "serving alone", 30*time.Second, func(st shards.Status, ls reconcile.Status) bool {
		return st.State == shards.StateServing && slices.Equal(st.Members, []string{"solo"})
	})

	// write creates or renews the peer's Lease with renewTime at and
	// leaseDurationSeconds secs.
	write := func(name string, secs int32, at time.Time) {
		t.Helper()
		holder, mt := name+"_skewed", metav1.NewMicroTime(at)
		l, err := leases.Get(ctx, "g-"+name, metav1.GetOptions{})
		if err != nil {
			l = &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: "g-" + name,
				Labels:      map[string]string{shards.LabelGroup: "g"},
				Annotations: map[string]string{shards.AnnotationMember: name}}}
		}
		l.Spec.HolderIdentity, l.Spec.LeaseDurationSeconds, l.Spec.RenewTime = &holder, &secs, &mt
		if l.ResourceVersion == "" {
			_, err = leases.Create(ctx, l, metav1.CreateOptions{})
		} else {
			_, err = leases.Update(ctx, l, metav1.UpdateOptions{})
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	hasPeer := func(name string) func(shards.Status, reconcile.Status) bool {
		return func(st shards.Status, _ reconcile.Status) bool {
			return slices.Equal(st.Members, []string{name, "solo"})
		}
	}

	// Behind: renewTime an hour ago, a 10 s Lease renewed every 300 ms
	// for 4 s: live all along (a 10 s margin, for a loaded machine).
	behind := time.Now().Add(-time.Hour)
	write("behind", 10, behind)
	waitMember(t, m, "the peer an hour behind seen live", 10*time.Second, hasPeer("behind"))
	for start := time.Now(); time.Since(start) < 4*time.Second; {
		time.Sleep(300 * time.Millisecond)
		write("behind", 10, behind.Add(time.Since(start)))
		if st := m.Status(); !slices.Equal(st.Members, []string{"behind", "solo"}) {
			t.Fatalf("members %v %v after the peer started renewing; want [behind solo]: a renewing peer judged by its clock", st.Members, time.Since(start))
		}
	}
	// Its Lease is deleted: gone at the next look.
	if err := leases.Delete(ctx, "g-behind", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	waitMember(t, m, "alone again", 10*time.Second, func(st shards.Status, _ reconcile.Status) bool {
		return slices.Equal(st.Members, []string{"solo"})
	})

	// Ahead: renewTime an hour from now, never renewed: dead once this
	// replica has seen no renewal for the Lease duration (2 s), not in an
	// hour.
	write("ahead", 2, time.Now().Add(time.Hour))
	waitMember(t, m, "the peer an hour ahead seen", 10*time.Second, hasPeer("ahead"))
	waitMember(t, m, "the peer an hour ahead expired", 15*time.Second, func(st shards.Status, _ reconcile.Status) bool {
		return slices.Equal(st.Members, []string{"solo"})
	})
}
