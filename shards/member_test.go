package shards_test

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/go-logr/logr/testr"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes"

	"github.com/watchjournal/watchjournal/internal/hashrange"
	"github.com/watchjournal/watchjournal/internal/testing/controlplane"
	"github.com/watchjournal/watchjournal/journal"
	"github.com/watchjournal/watchjournal/reconcile"
	"github.com/watchjournal/watchjournal/shards"
)

// waitMember waits for cond on the member's Status, printing the last one
// on a timeout.
func waitMember(t *testing.T, m *shards.Member, what string, within time.Duration, cond func(shards.Status, reconcile.Status) bool) {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		st, ls := m.Status(), m.Loops().Status()
		if cond(st, ls) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %v; last status %+v, loop phase %s", what, within, st, ls.Phase)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// A member alone takes the whole space; a member that cannot renew its
// Lease (another instance took it) stops journaling once it expires, and
// journals again once it holds the Lease again.
func TestMember_LosesAndRegainsLease(t *testing.T) {
	cp := controlplane.StartT(t, controlplane.Options{})
	cfg := cp.RESTConfig()
	cs := kubernetes.NewForConfigOrDie(cfg)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	for i := range 20 {
		if _, err := cs.CoreV1().ConfigMaps("default").Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprint("cm-", i)}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	res := journal.Resource{GVR: schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}, Namespace: "default"}
	m, err := shards.Open(cfg, filepath.Join(t.TempDir(), "cm.db"), res, shards.Options{
		Group: "g", Member: "solo", LeaseDuration: 2 * time.Second, RenewInterval: 500 * time.Millisecond, Logger: testr.New(t),
	})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	done := make(chan error, 1)
	go func() { done <- m.Run(ctx) }()
	waitMember(t, m, "serving the whole space", 30*time.Second, func(st shards.Status, ls reconcile.Status) bool {
		return st.State == shards.StateServing && st.Published == hashrange.Full().Selector() && ls.ShardMode == reconcile.ShardClient
	})
	if keys, _ := m.Journal().ScanIndex("", 100); len(keys) < 20 {
		t.Fatalf("index holds %d keys; want the 20 ConfigMaps at least", len(keys))
	}

	// Another instance takes the Lease and keeps it fresh.
	leases := cs.CoordinationV1().Leases("default")
	other := "solo_intruder"
	steal := func() {
		l, err := leases.Get(ctx, "g-solo", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		now := metav1.NewMicroTime(time.Now())
		l.Spec.HolderIdentity, l.Spec.RenewTime = &other, &now
		if _, err := leases.Update(ctx, l, metav1.UpdateOptions{}); err != nil {
			t.Log(err) // a renewal came between: try again
		}
	}
	stolen := time.Now()
	stop, stopped := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(stopped)
		for {
			select {
			case <-stop:
				return
			case <-time.After(200 * time.Millisecond):
				steal()
			}
		}
	}()
	waitMember(t, m, "lost", 10*time.Second, func(st shards.Status, ls reconcile.Status) bool {
		return st.State == shards.StateLost && ls.Phase == reconcile.PhaseStopped
	})
	if took := time.Since(stolen); took < time.Second {
		t.Errorf("lost %v after the Lease was taken; want about the Lease duration (2s)", took)
	}
	if err := m.Status().LastError; !errors.Is(err, shards.ErrLeaseHeld) {
		t.Errorf("LastError = %v; want ErrLeaseHeld", err)
	}
	close(stop)
	<-stopped
	// The intruder stops renewing: the Lease expires and the member takes it.
	waitMember(t, m, "serving again", 15*time.Second, func(st shards.Status, ls reconcile.Status) bool {
		return st.State == shards.StateServing && ls.Synced
	})
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("Run = %v; want nil", err)
	}
	if l, err := leases.Get(context.Background(), "g-solo", metav1.GetOptions{}); err == nil {
		t.Errorf("the Lease is still there after Run returned (holder %s); want it deleted", *l.Spec.HolderIdentity)
	}
}
