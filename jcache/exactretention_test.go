package jcache_test

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-logr/logr/testr"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	crcache "sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/watchjournal/watchjournal/jcache"
	"github.com/watchjournal/watchjournal/journal"
)

// An Exact source's consumer holds its file's retention back: under a
// bound of 3 events (Retention.MaxEvents), no event after the source's
// commit is trimmed while a key whose reconcile keeps failing holds that
// commit, though the 20 keys after it are reconciled; once the key
// reconciles, the commit reaches the head and the file is trimmed to the
// bound.
func TestExact_ConsumerHoldsRetention(t *testing.T) {
	cp, kube, ns := setup(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	dir := t.TempDir()
	createCM(t, kube, ns, "first", nil, nil)
	opts := jcache.WithRetentionInterval(jcache.Options{Dir: dir, NoSync: true, Logger: testr.New(t),
		Retention: &journal.Retention{MaxEvents: 3}}, 20*time.Millisecond)
	rc := startCache(t, jcache.NewFunc(opts), crcache.Options{}, cp)
	defer rc.stop()
	var stuck atomic.Bool
	stuck.Store(true)
	h := runByHandWith(t, rc.c, ns, func(name string) (reconcile.Result, error) {
		if name == "stuck" && stuck.Load() {
			return reconcile.Result{}, errors.New("not yet")
		}
		return reconcile.Result{}, nil
	}, jcache.ExactOptions{})
	defer h.stop()
	state := func() any {
		_, s := atHead(h.src)
		offs, err := jcache.FileOffsets(dir)
		return fmt.Sprintf("%s offsets %v %v; reconciled %v", s, offs, err, h.rec.names())
	}
	h.rec.waitUntil(t, "the replay reconciled and committed (the consumer exists)", func() bool {
		ok, _ := atHead(h.src)
		return ok
	}, state)

	createCM(t, kube, ns, "stuck", nil, nil)
	const n = 20
	for i := range n {
		createCM(t, kube, ns, fmt.Sprintf("cm%02d", i), nil, nil)
	}
	h.rec.waitUntil(t, "the keys after stuck reconciled, stuck retried", func() bool {
		return len(h.rec.names()) == n+2 && h.rec.count("stuck") > 1
	}, state)

	// Two retention rounds after the last append: the first commits the
	// handlers' hold at the head H and then trims; the second (after one
	// more event) starts only once that trim is done.
	offsets := func() (first, head uint64) {
		t.Helper()
		offs, err := jcache.FileOffsets(dir)
		if err != nil || len(offs) != 1 {
			t.Fatalf("FileOffsets = %v, %v; want one file", offs, err)
		}
		for _, o := range offs {
			first, head = o[0], o[1]
		}
		return first, head
	}
	waitRound := func(what string) {
		t.Helper()
		h.rec.waitUntil(t, what, func() bool {
			c, head, err := jcache.HandlersRecord(dir)
			return err == nil && c == head
		}, state)
	}
	waitRound("a retention round after the last append")
	createCM(t, kube, ns, "late", nil, nil)
	h.rec.waitUntil(t, "late reconciled", func() bool { return h.rec.count("late") > 0 }, state)
	waitRound("a retention round after the one that trimmed")

	committed, err := h.src.Committed()
	if err != nil {
		t.Fatal(err)
	}
	first, head := offsets()
	t.Logf("held: committed %d, the file's events %d..%d", committed, first, head)
	if head < committed+n {
		t.Fatalf("committed %d, head %d; want the commit held at least %d events behind, before stuck's event", committed, head, n)
	}
	if first > committed+1 {
		t.Errorf("the file's first retained offset is %d, committed %d (head %d): retention trimmed events the Exact source had not committed", first, committed, head)
	}

	// stuck reconciles: its change is queued at once (its failed request
	// waits in the rate limiter's backoff).
	stuck.Store(false)
	if _, err := kube.CoreV1().ConfigMaps(ns).Patch(ctx, "stuck", types.MergePatchType, []byte(`{"data":{"k":"v"}}`), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	h.rec.waitUntil(t, "the commit at the head, the file trimmed to 3 events", func() bool {
		ok, _ := atHead(h.src)
		first, head := offsets()
		return ok && head-first+1 <= 3
	}, state)
}
