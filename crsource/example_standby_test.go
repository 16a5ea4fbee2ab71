package crsource_test

import (
	"context"
	"log"

	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/watchjournal/watchjournal/crsource"
	"github.com/watchjournal/watchjournal/journal"
)

// Leader election with a warm standby: each replica its own journal file
// (its own volume), the writer on every replica, the controller on the
// leader, the position on a Lease of its own (standby.go, at the top).
func ExampleSource_AddToManager() {
	var cfg *rest.Config // e.g. ctrl.GetConfigOrDie()
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{
		LeaderElection:                true,
		LeaderElectionID:              "mirror-leader",
		LeaderElectionNamespace:       "mirror-system",
		LeaderElectionReleaseOnCancel: true, // the next leader takes over at once, from the final position
	})
	if err != nil {
		log.Fatal(err)
	}
	src, err := crsource.New(cfg, crsource.Options{
		Path:     "/data/configmaps.db", // a volume of this replica's own
		Resource: journal.Resource{GVR: schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}, Namespace: "demo"},
		Standby:  &crsource.Standby{Namespace: "mirror-system", Name: "mirror-position"},
	})
	if err != nil {
		log.Fatal(err) // journal.ErrLocked: another replica runs on this file
	}
	if err := src.AddToManager(mgr); err != nil {
		log.Fatal(err)
	}
	r := reconcile.Func(func(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
		return reconcile.Result{}, nil
	})
	if err := ctrl.NewControllerManagedBy(mgr).Named("mirror").WatchesRawSource(src).Complete(src.Reconciler(r)); err != nil {
		log.Fatal(err)
	}
	_ = mgr.Start(ctrl.SetupSignalHandler())
}
