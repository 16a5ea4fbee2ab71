package reconcile_test

import (
	"context"
	"testing"
	"time"

	"github.com/watchjournal/watchjournal/reconcile"
)

// Scenario S09: etcd goes away (watches end, lists fail), comes back,
// objects change, then kube-apiserver is killed and restarted. Failed lists
// change nothing; the loop retries with capped backoff and ends with
// exactly the changes, once each.
func TestLoop_EtcdAndAPIServerOutage(t *testing.T) {
	e := newEnv(t)
	e.createAll("a", "b", "c")
	opts := testOptions(t)
	// With etcd gone the apiserver keeps watches open and silent: the idle
	// bound replaces them, and the new requests fail.
	opts.IdleTimeout = time.Second
	opts.RequestTimeout = 5 * time.Second
	h := e.startListed(nil, opts)
	ctx := context.Background()

	if err := e.cp.StopEtcd(); err != nil {
		t.Fatal(err)
	}
	// The apiserver still opens watches (they stay silent) or fails them:
	// either way the loop keeps trying and journals nothing.
	tries := e.loop.Status().Watches + e.loop.Status().IdleRestarts
	e.waitStatus("retries while etcd is down", func(s reconcile.Status) bool {
		return s.Watches+s.IdleRestarts >= tries+3 || s.LastError != nil
	})
	if e.head() != h {
		t.Fatalf("events while etcd is down: head %d; want %d", e.head(), h)
	}
	if err := e.cp.StartEtcd(ctx); err != nil {
		t.Fatal(err)
	}
	// The apiserver needs a moment to reconnect to etcd.
	deadline := time.Now().Add(60 * time.Second)
	for {
		if _, err := e.kube.CoreV1().ConfigMaps(e.ns).List(ctx, metaListOne); err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("apiserver never recovered from the etcd restart")
		}
		time.Sleep(100 * time.Millisecond)
	}
	e.delete("b")
	e.create("d")
	e.waitHead(h + 2)
	e.waitStatus("synced", func(s reconcile.Status) bool { return s.Phase == reconcile.PhaseWatching && s.LastError == nil })

	if err := e.cp.RestartAPIServer(ctx); err != nil {
		t.Fatal(err)
	}
	w := e.loop.Status().Watches
	e.waitStatus("watching after the apiserver restart", func(s reconcile.Status) bool { return s.Watches > w && s.Phase == reconcile.PhaseWatching })
	e.update("c")
	e.waitHead(h + 3)

	got, _ := e.eventsFrom(h + 1)
	// DELETED b and ADDED d come live or from a relist, in either order.
	if len(got) != 3 || got[2] != "MODIFIED c watch" ||
		!((hasPrefix(got[0], "DELETED b") && hasPrefix(got[1], "ADDED d")) || (hasPrefix(got[0], "ADDED d") && hasPrefix(got[1], "DELETED b"))) {
		t.Fatalf("events = %q; want DELETED b and ADDED d (either order), then MODIFIED c watch", got)
	}
	e.checkIndex(e.j)
}
