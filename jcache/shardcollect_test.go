package jcache_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/watchjournal/watchjournal/jcache"
)

// A replica killed without deleting its Lease, whose name no later
// replica takes (pod names change), leaves the Lease expired: once the
// live replicas publish its range, one of them deletes it, and keeps its
// own.
func TestShard_DeadLeaseDeletedOnceItsRangeIsPublished(t *testing.T) {
	cp, kube, ns := setup(t)
	rc := cp.RESTConfig()
	createCMs(t, kube, ns, 10, func(i int) string { return fmt.Sprintf("cm-%02d", i) }, func(int) string { return "1" })
	so := jcache.ShardOptions{
		Group: "collect", Namespace: ns,
		Resources:     []schema.GroupResource{{Resource: "configmaps"}},
		LeaseDuration: 2 * time.Second, RenewInterval: 300 * time.Millisecond,
	}
	var last string
	settled := func(r *takeoverReplica, why string) {
		t.Helper()
		waitShard(t, why, func() bool {
			ok, s := takeoverSettled([]*takeoverReplica{r})
			last = s
			return ok
		}, func() string { return last })
	}
	r0 := startTakeoverReplica(t, rc, so, "r0", jcache.AbandonShardLease)
	settled(r0, "r0 settles")
	r0.stop(t)
	if _, err := kube.CoordinationV1().Leases(ns).Get(context.Background(), "collect-r0", metav1.GetOptions{}); err != nil {
		t.Fatalf("r0's Lease after it was killed: %v; want it left behind", err)
	}
	r1 := startTakeoverReplica(t, rc, so, "r1")
	defer r1.stop(t)
	waitShard(t, "r1 deletes r0's Lease once it publishes r0's range", func() bool {
		_, err := kube.CoordinationV1().Leases(ns).Get(context.Background(), "collect-r0", metav1.GetOptions{})
		ok, s := takeoverSettled([]*takeoverReplica{r1})
		last = fmt.Sprintf("r0's Lease: %v; r1: settled %v, %s", err, ok, s)
		return apierrors.IsNotFound(err)
	}, func() string { return last })
	if _, err := kube.CoordinationV1().Leases(ns).Get(context.Background(), "collect-r1", metav1.GetOptions{}); err != nil {
		t.Fatalf("r1's own Lease: %v; want it kept", err)
	}
}
