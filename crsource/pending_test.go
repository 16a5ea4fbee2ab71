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
	c, err := j.Consumer("controller")
	if err != nil {
		t.Fatal(err)
	}
	src := crsource.NewFromConsumer(c, nil, crsource.Options{MaxPending: 10})
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
	r := src.Reconciler(reconcile.Func(func(context.Context, reconcile.Request) (reconcile.Result, error) {
		return reconcile.Result{}, nil
	}))
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
