package crsource_test

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/watchjournal/watchjournal/crsource"
	"github.com/watchjournal/watchjournal/journal"
)

// A backlog larger than MaxPending does not deadlock the start: the
// controller's workers begin only after WaitForSync, so WaitForSync returns
// once MaxPending requests wait, and the feeder queues the rest as the
// workers make room. Pure logic (a hand-written journal, a workqueue).
func TestSource_BacklogAboveMaxPending(t *testing.T) {
	res := journal.Resource{GVR: schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}, Namespace: "wj"}
	j, err := journal.Open(filepath.Join(t.TempDir(), "j.db"), &journal.Options{Resource: &res, NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	defer j.Close()
	const n = 50
	if err := j.Writer().Update(func(tx *journal.Tx) error {
		for i := 0; i < n; i++ {
			e := journal.Event{Type: journal.Added, Key: fmt.Sprintf("wj/o%02d", i), UID: "u", ResourceVersion: "1", Origin: journal.OriginRelist}
			if _, err := tx.Append(&e); err != nil {
				return err
			}
		}
		return tx.SetResourceVersion("1")
	}); err != nil {
		t.Fatal(err)
	}
	c, err := j.Consumers().Open("controller")
	if err != nil {
		t.Fatal(err)
	}
	src := crsource.NewFromConsumer(c, nil, crsource.Options{MaxPending: 10})
	r := src.Reconciler(reconcile.Func(func(context.Context, reconcile.Request) (reconcile.Result, error) {
		return reconcile.Result{}, nil
	}))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	q := workqueue.NewTypedRateLimitingQueue(workqueue.DefaultTypedControllerRateLimiter[reconcile.Request]())
	defer q.ShutDown()
	if err := src.Start(ctx, q); err != nil {
		t.Fatal(err)
	}
	if err := src.WaitForSync(ctx); err != nil {
		t.Fatalf("WaitForSync with a backlog of %d and MaxPending 10 = %v", n, err)
	}
	seen := map[string]bool{}
	for len(seen) < n {
		req, shutdown := q.Get()
		if shutdown {
			t.Fatalf("queue shut down after %d requests", len(seen))
		}
		if _, err := r.Reconcile(ctx, req); err != nil {
			t.Fatal(err)
		}
		seen[req.Name] = true
		q.Done(req)
	}
	for {
		if off, _ := c.Committed(); off == n {
			break
		}
		select {
		case <-ctx.Done():
			off, _ := c.Committed()
			t.Fatalf("committed %d after all %d reconciled; want %d", off, n, n)
		case <-time.After(10 * time.Millisecond): // the committer is another goroutine
		}
	}
	cancel()
	<-src.Done()
}

// A DELETED whose reason is moved (the key went to another replica's
// shard) queues no request; one whose reason is left-selector or gone
// does, and an ADDED with reason moved does (this replica owns the key
// now). The position moves past all of them once the queued ones are
// reconciled. Pure logic (a hand-written journal, a workqueue).
func TestSource_Reasons_MovedDeleteNotQueued(t *testing.T) {
	res := journal.Resource{GVR: schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}, Namespace: "wj"}
	j, err := journal.Open(filepath.Join(t.TempDir(), "j.db"), &journal.Options{Resource: &res, NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	defer j.Close()
	evs := []journal.Event{
		{Type: journal.Added, Key: "wj/moved", UID: "u1", ResourceVersion: "1", Origin: journal.OriginRelist},
		{Type: journal.Added, Key: "wj/left", UID: "u2", ResourceVersion: "1", Origin: journal.OriginRelist},
		{Type: journal.Added, Key: "wj/gone", UID: "u3", ResourceVersion: "1", Origin: journal.OriginRelist},
	}
	more := []journal.Event{
		{Type: journal.Deleted, Key: "wj/moved", UID: "u1", ResourceVersion: "1", Origin: journal.OriginRelist, Reason: journal.ReasonMoved},
		{Type: journal.Deleted, Key: "wj/left", UID: "u2", ResourceVersion: "2", Origin: journal.OriginWatch, Reason: journal.ReasonLeftSelector},
		{Type: journal.Deleted, Key: "wj/gone", UID: "u3", ResourceVersion: "3", Origin: journal.OriginWatch, Reason: journal.ReasonGone},
		{Type: journal.Added, Key: "wj/back", UID: "u4", ResourceVersion: "4", Origin: journal.OriginRelist, Reason: journal.ReasonMoved},
	}
	for _, batch := range [][]journal.Event{evs, more} {
		if err := j.Writer().Update(func(tx *journal.Tx) error {
			for i := range batch {
				if _, err := tx.Append(&batch[i]); err != nil {
					return err
				}
			}
			return tx.SetResourceVersion("4")
		}); err != nil {
			t.Fatal(err)
		}
	}
	c, err := j.Consumers().Open("controller")
	if err != nil {
		t.Fatal(err)
	}
	// The first three are reconciled already.
	if err := j.Consumers().Commit("controller", 3); err != nil {
		t.Fatal(err)
	}
	c.Seek(4)
	src := crsource.NewFromConsumer(c, nil, crsource.Options{})
	r := src.Reconciler(reconcile.Func(func(context.Context, reconcile.Request) (reconcile.Result, error) {
		return reconcile.Result{}, nil
	}))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	q := workqueue.NewTypedRateLimitingQueue(workqueue.DefaultTypedControllerRateLimiter[reconcile.Request]())
	defer q.ShutDown()
	if err := src.Start(ctx, q); err != nil {
		t.Fatal(err)
	}
	if err := src.WaitForSync(ctx); err != nil {
		t.Fatal(err)
	}
	var got []string
	for q.Len() > 0 {
		req, _ := q.Get()
		if _, err := r.Reconcile(ctx, req); err != nil {
			t.Fatal(err)
		}
		got = append(got, req.Name)
		q.Done(req)
	}
	if want := []string{"left", "gone", "back"}; fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("queued %v; want %v (no request for the moved DELETED)", got, want)
	}
	for {
		if off, _ := c.Committed(); off == 7 {
			break
		}
		select {
		case <-ctx.Done():
			off, _ := c.Committed()
			t.Fatalf("committed %d after the queued requests were reconciled; want 7", off)
		case <-time.After(10 * time.Millisecond): // the committer is another goroutine
		}
	}
}

// A consumer that retention passed is resynchronized by queueing every key
// of the index, MaxPending at a time: with 50 keys and MaxPending 10 the
// queue never holds more than 10 requests (before, all 50 at once: a
// million for a million objects), every key is reconciled once, and the
// commit stays where it was until the last, then reaches the head. Pure logic (a file trimmed
// by hand, a workqueue).
func TestSource_ResyncQueuesMaxPendingAtATime(t *testing.T) {
	res := journal.Resource{GVR: schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}, Namespace: "wj"}
	j, err := journal.Open(filepath.Join(t.TempDir(), "j.db"), &journal.Options{Resource: &res, NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	defer j.Close()
	const n, max = 50, 10
	if err := j.Writer().Update(func(tx *journal.Tx) error {
		for i := 0; i < n; i++ {
			e := journal.Event{Type: journal.Added, Key: fmt.Sprintf("wj/o%02d", i), UID: "u", ResourceVersion: "1", Origin: journal.OriginRelist}
			if _, err := tx.Append(&e); err != nil {
				return err
			}
		}
		return tx.SetResourceVersion("1")
	}); err != nil {
		t.Fatal(err)
	}
	c, err := j.Consumers().Open("controller")
	if err != nil {
		t.Fatal(err)
	}
	// Retention passed the consumer (committed 0): only the last event is left.
	if trimmed, _, err := j.Writer().Trim(n, n, 0, 0); err != nil || trimmed != n-1 {
		t.Fatalf("Trim = %d, %v; want %d", trimmed, err, n-1)
	}
	src := crsource.NewFromConsumer(c, nil, crsource.Options{MaxPending: max})
	r := src.Reconciler(reconcile.Func(func(context.Context, reconcile.Request) (reconcile.Result, error) {
		return reconcile.Result{}, nil
	}))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	q := workqueue.NewTypedRateLimitingQueue(workqueue.DefaultTypedControllerRateLimiter[reconcile.Request]())
	defer q.ShutDown()
	if err := src.Start(ctx, q); err != nil {
		t.Fatal(err)
	}
	if err := src.WaitForSync(ctx); err != nil {
		t.Fatal(err)
	}
	seen := map[string]int{}
	for len(seen) < n {
		if l := q.Len(); l > max {
			t.Fatalf("%d requests queued after %d keys reconciled; want at most MaxPending %d", l, len(seen), max)
		}
		if off, _ := c.Committed(); off >= n && len(seen) < n {
			t.Fatalf("committed %d with %d of %d keys reconciled; want the commit below %d until all are", off, len(seen), n, n)
		}
		// Where it was (0), not just below n: a crash during the resync
		// must resync again, not skip the keys not yet reconciled.
		if off, _ := c.Committed(); off != 0 && len(seen) < n {
			t.Fatalf("committed %d with %d of %d keys reconciled; want 0 (where it was) until all are", off, len(seen), n)
		}
		req, shutdown := q.Get()
		if shutdown {
			t.Fatalf("queue shut down after %d keys", len(seen))
		}
		if _, err := r.Reconcile(ctx, req); err != nil {
			t.Fatal(err)
		}
		seen[req.Name]++
		q.Done(req)
	}
	for k, times := range seen {
		if times != 1 {
			t.Errorf("key %s reconciled %d times; want once", k, times)
		}
	}
	for {
		off, _ := c.Committed()
		if off == n {
			break
		}
		select {
		case <-ctx.Done():
			t.Fatalf("committed %d after all %d keys reconciled; want %d", off, n, n)
		case <-time.After(10 * time.Millisecond): // the committer is another goroutine
		}
	}
	if l := q.Len(); l != 0 {
		t.Errorf("%d requests queued after the resync; want none", l)
	}
	cancel()
	<-src.Done()
}
