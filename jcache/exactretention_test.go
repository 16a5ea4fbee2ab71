package jcache_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-logr/logr/funcr"
	"github.com/go-logr/logr/testr"
	corev1 "k8s.io/api/core/v1"
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

// A replay holds retention too, before its consumer exists: under a soft
// bound (MaxBytes 16 KiB) and steady churn on one key, a replay whose
// reconciles take longer than the churn takes to fill the bound still has
// the events after its head when it has queued every object, so it runs
// once, the consumer is created and the commit follows the churn. Without
// the hold, retention trims past the replay's head and every object is
// replayed again and again, with no consumer.
func TestExact_LongReplayUnderChurnHoldsRetention(t *testing.T) {
	cp, kube, ns := setup(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	all := createNumbered(t, kube, ns, 30)
	dir := t.TempDir()
	var replays atomic.Int32
	logger := funcr.New(func(prefix, args string) {
		if strings.Contains(args, "replay queued every object") {
			replays.Add(1)
		}
	}, funcr.Options{})
	rc := startCache(t, jcache.NewFunc(jcache.WithRetentionInterval(jcache.Options{Dir: dir, NoSync: true, Logger: logger,
		Retention: &journal.Retention{MaxBytes: 16 << 10}}, 50*time.Millisecond)), crcache.Options{}, cp)
	defer rc.stop()

	// Churn: cm00 changes with 2 KiB every 50 ms (the bound's worth in
	// 0.4 s) until the test ends.
	churnCtx, stopChurn := context.WithCancel(ctx)
	churned := make(chan struct{})
	defer func() { stopChurn(); <-churned }()
	go func() {
		defer close(churned)
		big := strings.Repeat("x", 2048)
		for i := 0; churnCtx.Err() == nil; i++ {
			patch := fmt.Sprintf(`{"data":{"v":"%d-%s"}}`, i, big)
			_, _ = kube.CoreV1().ConfigMaps(ns).Patch(churnCtx, all[0], types.MergePatchType, []byte(patch), metav1.PatchOptions{})
			select {
			case <-churnCtx.Done():
			case <-time.After(50 * time.Millisecond):
			}
		}
	}()

	// A reconcile takes 100 ms, two at a time (MaxPending 2): the replay
	// of 30 objects takes about 3 s, several times the churn's bound.
	h := runByHandWith(t, rc.c, ns, func(string) (reconcile.Result, error) {
		time.Sleep(100 * time.Millisecond)
		return reconcile.Result{}, nil
	}, jcache.ExactOptions{MaxPending: 2})
	defer h.stop()
	h.rec.waitUntil(t, "every object reconciled and the consumer created", func() bool {
		c, err := h.src.Committed()
		return err == nil && c > 0 && len(h.rec.names()) == len(all)
	}, func() any {
		c, err := h.src.Committed()
		offs, oerr := jcache.FileOffsets(dir)
		return fmt.Sprintf("committed %d (%v), replays %d, offsets %v (%v), cm29 reconciled %d times", c, err, replays.Load(), offs, oerr, h.rec.count(all[29]))
	})
	if n, c := replays.Load(), h.rec.count(all[29]); n != 1 || c != 1 {
		t.Fatalf("%d replays, cm29 (never changed) reconciled %d times; want one replay, once", n, c)
	}
	for _, c := range consumersNamed(t, h.src, "replaying:") {
		t.Errorf("the replay's hold %s (committed %d) is left after the consumer was created", c.Name, c.Committed)
	}
}

// A replay whose head is trimmed before it holds retention there (the
// head is read in one transaction, the hold created in another) holds at
// the first retained event instead, and the replay goes on: the source
// does not fail.
func TestExact_ReplayHoldAfterItsHeadWasTrimmed(t *testing.T) {
	cp, kube, ns := setup(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	all := createNumbered(t, kube, ns, 5)
	dir := t.TempDir()
	rc := startCache(t, jcache.NewFunc(jcache.WithRetentionInterval(jcache.Options{Dir: dir, NoSync: true, Logger: testr.New(t),
		Retention: &journal.Retention{MaxEvents: 1}}, 50*time.Millisecond)), crcache.Options{}, cp)
	defer rc.stop()
	getInformer(t, ctx, rc.c, &corev1.ConfigMap{})
	// The hook runs on the source's goroutine: it reports, the test fails.
	var trimmedPast atomic.Bool
	hooked := make(chan error, 1)
	opts := jcache.WithBeforeReplayHold(jcache.ExactOptions{}, func(head uint64) {
		if trimmedPast.Swap(true) {
			return
		}
		hooked <- func() error {
			for i := range 3 {
				if _, err := kube.CoreV1().ConfigMaps(ns).Patch(ctx, all[0], types.MergePatchType, []byte(fmt.Sprintf(`{"data":{"v":"%d"}}`, i)), metav1.PatchOptions{}); err != nil {
					return err
				}
			}
			return untilFirstRetained(dir, "configmaps.", head+2)
		}()
	})
	h := runByHandWith(t, rc.c, ns, func(string) (reconcile.Result, error) { return reconcile.Result{}, nil }, opts)
	defer h.stop()
	select {
	case err := <-hooked:
		if err != nil {
			t.Fatal(err)
		}
	case <-ctx.Done():
		t.Fatal("the replay never read its head")
	}
	h.waitEveryObjectAtHead(t, "the replay after its head was trimmed", all)
	if err := h.src.Err(); err != nil {
		t.Fatalf("the source failed: %v", err)
	}
}
