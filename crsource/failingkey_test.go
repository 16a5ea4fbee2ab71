package crsource_test

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/watchjournal/watchjournal/crsource"
	"github.com/watchjournal/watchjournal/journal"
)

// A key whose reconcile keeps failing holds the commit before its event,
// not the feed: the keys after it are all reconciled, far past MaxPending.
// Pure logic (a hand-written journal, a workqueue).
func TestSource_FailingKeyDoesNotStopTheFeed(t *testing.T) {
	res := journal.Resource{GVR: schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}, Namespace: "wj"}
	j, err := journal.Open(filepath.Join(t.TempDir(), "j.db"), &journal.Options{Resource: &res, NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	defer j.Close()
	const n = 50
	if err := j.Writer().Update(func(tx *journal.Tx) error {
		for i := 0; i <= n; i++ {
			key := fmt.Sprintf("wj/o%02d", i)
			if i == 0 {
				key = "wj/bad"
			}
			e := journal.Event{Type: journal.Added, Key: key, UID: "u", ResourceVersion: "1", Origin: journal.OriginRelist}
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
	var mu sync.Mutex
	seen := map[string]bool{}
	all := make(chan struct{})
	r := src.Reconciler(reconcile.Func(func(_ context.Context, req reconcile.Request) (reconcile.Result, error) {
		if req.Name == "bad" {
			return reconcile.Result{}, errors.New("bad fails")
		}
		mu.Lock()
		seen[req.Name] = true
		if len(seen) == n {
			close(all)
		}
		mu.Unlock()
		return reconcile.Result{}, nil
	}))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	q := workqueue.NewTypedRateLimitingQueue(workqueue.DefaultTypedControllerRateLimiter[reconcile.Request]())
	if err := src.Start(ctx, q); err != nil {
		t.Fatal(err)
	}
	if err := src.WaitForSync(ctx); err != nil {
		t.Fatal(err)
	}
	worker := make(chan struct{})
	go func() {
		defer close(worker)
		for {
			req, shutdown := q.Get()
			if shutdown {
				return
			}
			if _, err := r.Reconcile(ctx, req); err != nil {
				q.AddRateLimited(req)
			} else {
				q.Forget(req)
			}
			q.Done(req)
		}
	}()
	select {
	case <-all:
	case <-ctx.Done():
		mu.Lock()
		t.Errorf("%d of the %d keys after a failing one reconciled; want all (MaxPending 10)", len(seen), n)
		mu.Unlock()
	}
	if off, _ := c.Committed(); off != 0 {
		t.Errorf("committed %d while bad (offset 1) fails; want 0", off)
	}
	cancel()
	q.ShutDown()
	<-worker
	<-src.Done()
}
