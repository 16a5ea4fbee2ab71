package jcache_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
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

// A commit that comes while the feed resets a consumer retention trimmed
// past does not leave the source believing in a consumer the feed then
// deletes: after the replay the consumer exists again, committed at the
// head, and holds retention back.
//
// The source follows with MaxPending 1; cm00's change waits in a held
// reconcile while cm01's changes pass the hard cap, so retention trims
// past the consumer. Releasing cm00 moves the commit point and makes room
// at once: the feed finds its next events trimmed and is paused (a hook)
// once it marked the consumer for reset, before deleting it, until the
// committer's commit of cm00's point has run.
func TestExact_TrimmedResetRefusesConcurrentCommit(t *testing.T) {
	cp, kube, ns := setup(t)
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	const n = 3
	for i := range n {
		createCM(t, kube, ns, fmt.Sprintf("cm%02d", i), nil, nil)
	}
	rc := startCache(t, jcache.NewFunc(jcache.WithRetentionInterval(jcache.Options{Dir: t.TempDir(), NoSync: true, Logger: testr.New(t),
		Retention: &journal.Retention{HardMaxBytes: 8 << 10}}, 50*time.Millisecond)), crcache.Options{}, cp)
	defer rc.stop()

	var held atomic.Bool
	gate := newHold()
	outcome := func(name string) (reconcile.Result, error) {
		if name == "cm00" && held.Load() {
			gate.wait()
		}
		return reconcile.Result{}, nil
	}
	var armed atomic.Bool
	marked := make(chan struct{})
	var pausedCommit struct {
		sync.Mutex
		p    uint64
		err  error
		done bool
	}
	attempted := make(chan struct{})
	trimmed := func() {
		close(marked) // the feed resets once in this test
		select {
		case <-attempted:
		case <-time.After(30 * time.Second):
			t.Error("no commit while the feed was paused between marking the consumer and deleting it")
		}
	}
	commit := func(p uint64, do func() error) error {
		if !armed.CompareAndSwap(true, false) {
			return do()
		}
		select {
		case <-marked:
		case <-time.After(30 * time.Second):
			t.Error("the feed did not find its events trimmed")
		}
		err := do()
		pausedCommit.Lock()
		pausedCommit.p, pausedCommit.err, pausedCommit.done = p, err, true
		pausedCommit.Unlock()
		close(attempted)
		return err
	}
	h := runByHandWith(t, rc.c, ns, outcome, jcache.WithExactHooks(jcache.ExactOptions{MaxPending: 1}, trimmed, commit))
	defer h.stop()
	defer gate.release() // before h.stop: the held reconcile returns
	h.rec.waitAtHead(t, "every object reconciled, the commit at the head", func() bool { return len(h.rec.names()) == n }, h.src)
	committed, err := h.src.Committed()
	if err != nil {
		t.Fatal(err)
	}

	// cm00 changes and its reconcile is held: with MaxPending 1 the feed
	// waits for room, the commit point stays before cm00's change.
	held.Store(true)
	before := h.rec.count("cm00")
	patchCM(t, ctx, kube, ns, "cm00", "held")
	h.rec.waitUntil(t, "cm00's change in its held reconcile", func() bool { return h.rec.count("cm00") > before },
		func() any { return h.rec.count("cm00") })
	// cm01 changes past the hard cap: retention trims past the consumer.
	big := strings.Repeat("x", 2048)
	for round := range 10 {
		patch := fmt.Sprintf(`{"data":{"v":"%d-%s"}}`, round, big)
		if _, err := kube.CoreV1().ConfigMaps(ns).Patch(ctx, "cm01", types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	j := h.src.Journal()
	h.rec.waitUntil(t, "retention trimmed past the consumer", func() bool {
		st, err := j.Stats()
		return err == nil && st.FirstOffset > committed+2
	}, func() any { st, err := j.Stats(); return fmt.Sprint(st, err, " committed ", committed) })

	armed.Store(true)
	held.Store(false)
	gate.release()
	select {
	case <-attempted:
	case <-ctx.Done():
		t.Fatal("no commit after cm00's reconcile was released")
	}
	h.rec.waitUntil(t, "the consumer again, committed at the head after the replay", func() bool {
		ok, _ := atHead(h.src)
		return ok
	}, func() any {
		_, s := atHead(h.src)
		pausedCommit.Lock()
		defer pausedCommit.Unlock()
		cs, err := j.Consumers().List()
		return fmt.Sprintf("%s; consumers %+v (%v); the commit while paused: offset %d, error %v", s, cs, err, pausedCommit.p, pausedCommit.err)
	})
	// The consumer holds retention back again: it is in the file, at the head.
	cs, err := j.Consumers().List()
	if err != nil {
		t.Fatal(err)
	}
	head, err := j.Head()
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, c := range cs {
		found = found || (c.Name == h.src.Consumer() && c.Committed == head)
	}
	if !found {
		t.Fatalf("consumers %+v; want %s committed at the head %d", cs, h.src.Consumer(), head)
	}
}
