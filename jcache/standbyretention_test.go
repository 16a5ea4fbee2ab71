package jcache_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/kubernetes"
	crcache "sigs.k8s.io/controller-runtime/pkg/cache"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/watchjournal/watchjournal/internal/testing/controlplane"
	"github.com/watchjournal/watchjournal/internal/testing/standbytest"
	"github.com/watchjournal/watchjournal/jcache"
	"github.com/watchjournal/watchjournal/journal"
)

// A published position the new leader cannot place replays every object:
// a stopped, and its position on the Lease is older than what retention
// left of b's file (b's cache journaled 10 changes past it, and trimmed
// its list and 5 of the changes). b has no consumer of its own, so its
// source replays every ConfigMap, says why, and each reconcile sees the
// object as it is now, not only the keys of the events b retains.
func TestExactStandby_PositionOlderThanRetentionReplays(t *testing.T) {
	ctrllog.SetLogger(logr.Discard())
	cp := controlplane.StartT(t, controlplane.Options{})
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	kube := kubernetes.NewForConfigOrDie(cp.RESTConfig())
	ns := "exstandby-retention"
	w := standbytest.NewWorkload(t, ctx, kube, ns)

	// a leads, reconciles every ConfigMap, publishes, stops.
	a := startExactReplica(t, cp, ns, "a", standbytest.NewReader(kube, ns), nil)
	a.elected(t, 30*time.Second)
	a.r.Wait(t, "a reconciled every ConfigMap and published its position", func() bool {
		return len(a.r.Names()) == standbytest.All && exPublished(t, ctx, kube, ns) != ""
	}, func() any { return map[string]any{"a": len(a.r.Names()), "position": exPublished(t, ctx, kube, ns)} })
	a.stop()
	pos := exPublished(t, ctx, kube, ns)

	// b's cache directory: its ConfigMaps file lists, journals 10
	// changes past a's position, and keeps the last 5 events.
	bdir := t.TempDir()
	retain := &journal.Retention{MaxEvents: 5}
	rc := startCache(t, jcache.NewFunc(jcache.WithRetentionInterval(jcache.Options{Dir: bdir, NoSync: true, Retention: retain}, 20*time.Millisecond)),
		crcache.Options{}, cp)
	getInformer(t, ctx, rc.c, &corev1.ConfigMap{})
	var changed []string
	for i := range 10 {
		n := fmt.Sprintf("s%02d", i)
		w.Update(n)
		if !standbytest.After(w.RVs[n], pos) {
			t.Fatalf("the change of %s at %s is not past a's position %s", n, w.RVs[n], pos)
		}
		changed = append(changed, n)
	}
	var last map[string][2]uint64
	deadline := time.Now().Add(time.Minute)
	for {
		offs, err := jcache.FileOffsets(bdir)
		if err != nil {
			t.Fatal(err)
		}
		last = offs
		var first, head uint64
		for f, o := range offs {
			if strings.HasPrefix(f, "configmaps.") {
				first, head = o[0], o[1]
			}
		}
		if head >= standbytest.All+10 && first > standbytest.All+1 {
			break // the list and the first changes are trimmed
		}
		if time.Now().After(deadline) {
			t.Fatalf("b's ConfigMaps file not trimmed past its list: offsets %v", last)
		}
		time.Sleep(20 * time.Millisecond)
	}
	rc.stop()

	// b leads on that directory.
	var logs logLines
	b := startExactReplicaOn(t, cp, ns, "b", standbytest.NewReader(kube, ns), nil, 0,
		jcache.Options{Dir: bdir, NoSync: true, Retention: retain, Logger: logs.logger()})
	b.elected(t, 30*time.Second)
	b.r.Wait(t, "b reconciled every ConfigMap", func() bool { return len(b.r.Names()) == standbytest.All },
		func() any { return map[string]any{"b": b.r.Names(), "b's file before": last} })
	text := strings.Join(logs.all(), "\n")
	if !strings.Contains(text, "replaying every object") || !strings.Contains(text, "older than this journal's retention") {
		t.Errorf("b's log does not say it replays because a's position is older than its retention:\n%s", text)
	}
	for _, n := range b.r.Names() {
		want := "0"
		if strings.HasPrefix(n, "s0") {
			want = "1"
		}
		if got := b.r.Last(n); got != want {
			t.Errorf("b's reconcile of %s saw v=%q; want %q (changed %v)", n, got, want, changed)
		}
	}
}
