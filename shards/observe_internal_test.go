package shards

import (
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// A Lease is judged by when this replica saw its renewals, never by the
// holder's clock: a renewTime an hour behind or ahead of the local clock
// means nothing by itself.
func TestObserver_Expired_ByLocalObservation(t *testing.T) {
	local := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	lease := func(holder string, renew time.Time) *coordinationv1.Lease {
		secs := int32(10)
		mt := metav1.NewMicroTime(renew)
		l := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: "g-peer"}}
		l.Spec.HolderIdentity, l.Spec.RenewTime, l.Spec.LeaseDurationSeconds = &holder, &mt, &secs
		return l
	}
	type look struct {
		after       time.Duration // local time since the start
		renew       time.Time     // the renewTime the peer wrote
		wantExpired bool
	}
	for _, tc := range []struct {
		name  string
		looks []look
	}{
		{"a peer whose clock is an hour behind and keeps renewing is live", []look{
			{0, local.Add(-time.Hour), false},
			{4 * time.Second, local.Add(-time.Hour + 4*time.Second), false},
			{13 * time.Second, local.Add(-time.Hour + 8*time.Second), false},
			{20 * time.Second, local.Add(-time.Hour + 12*time.Second), false},
		}},
		{"a peer whose clock is an hour ahead expires a duration after its last renewal was seen", []look{
			{0, local.Add(time.Hour), false},
			{4 * time.Second, local.Add(time.Hour + 4*time.Second), false},
			{13 * time.Second, local.Add(time.Hour + 4*time.Second), false},
			{14 * time.Second, local.Add(time.Hour + 4*time.Second), true},
		}},
		{"a Lease first seen long expired counts one duration from then", []look{
			{0, local.Add(-24 * time.Hour), false},
			{9 * time.Second, local.Add(-24 * time.Hour), false},
			{10 * time.Second, local.Add(-24 * time.Hour), true},
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var o observer
			for i, lk := range tc.looks {
				if got := o.expired(lease("peer_1", lk.renew), local.Add(lk.after)); got != lk.wantExpired {
					t.Fatalf("look %d at +%v (renewTime %v): expired = %v; want %v", i, lk.after, lk.renew, got, lk.wantExpired)
				}
			}
		})
	}
}
