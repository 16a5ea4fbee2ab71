package crsource_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"os"
	"path/filepath"

	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/workqueue"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/watchjournal/watchjournal/crsource"
	"github.com/watchjournal/watchjournal/journal"
)

// The common case: the source owns the journal and its writer; the
// controller watches it in place of For(&corev1.ConfigMap{}). Operator code
// imports controller-runtime's reconcile package only.
func ExampleNew() {
	var cfg *rest.Config // e.g. ctrl.GetConfigOrDie()
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{})
	if err != nil {
		log.Fatal(err)
	}
	src, err := crsource.New(cfg, crsource.Options{
		Path:     "configmaps.db",
		Resource: journal.Resource{GVR: schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}, Namespace: "demo"},
	})
	if err != nil {
		log.Fatal(err)
	}
	r := reconcile.Func(func(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
		fmt.Println("reconcile", req.NamespacedName)
		return reconcile.Result{}, nil
	})
	if err := ctrl.NewControllerManagedBy(mgr).Named("mirror").WatchesRawSource(src).Complete(src.Reconciler(r)); err != nil {
		log.Fatal(err)
	}
	_ = mgr.Start(ctrl.SetupSignalHandler())
}

// What the source does with a controller's queue, shown without a manager:
// a request per event, and a commit only past events whose requests were
// reconciled successfully. The journal here is written by hand; a program
// that runs the writer itself passes its sync signal.
func ExampleNewFromConsumer() {
	dir, _ := os.MkdirTemp("", "crsource-example")
	defer os.RemoveAll(dir)
	res := journal.Resource{GVR: schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}, Namespace: "demo"}
	j, err := journal.Open(filepath.Join(dir, "j.db"), &journal.Options{Resource: &res})
	if err != nil {
		log.Fatal(err)
	}
	defer j.Close()
	_ = j.Writer().Update(func(tx *journal.Tx) error {
		for _, k := range []string{"demo/a", "demo/b"} {
			e := journal.Event{Type: journal.Added, Key: k, UID: "u-" + k, ResourceVersion: "1", Origin: journal.OriginRelist}
			if _, err := tx.Append(&e); err != nil {
				return err
			}
		}
		return tx.SetResourceVersion("1")
	})
	c, err := j.Consumers().Open("controller")
	if err != nil {
		log.Fatal(err)
	}
	src := crsource.NewFromConsumer(c, nil, crsource.Options{})
	// The wrapper first, as a controller's builder takes it before Start:
	// WaitForSync refuses a source whose Reconciler was never called.
	r := src.Reconciler(reconcile.Func(func(_ context.Context, req reconcile.Request) (reconcile.Result, error) {
		if req.Name == "b" {
			return reconcile.Result{}, errors.New("not yet")
		}
		return reconcile.Result{}, nil
	}))

	ctx, cancel := context.WithCancel(context.Background())
	q := workqueue.NewTypedRateLimitingQueue(workqueue.DefaultTypedControllerRateLimiter[reconcile.Request]())
	if err := src.Start(ctx, q); err != nil {
		log.Fatal(err)
	}
	if err := src.WaitForSync(ctx); err != nil {
		log.Fatal(err)
	}
	for q.Len() > 0 { // what a controller's worker does
		req, _ := q.Get()
		_, err := r.Reconcile(ctx, req)
		fmt.Println(req.NamespacedName, "error:", err)
		q.Done(req)
	}
	cancel()
	<-src.Done()
	off, _ := c.Committed()
	fmt.Println("committed", off) // a (offset 1) done, b (offset 2) failed
	// Output:
	// demo/a error: <nil>
	// demo/b error: not yet
	// committed 1
}
