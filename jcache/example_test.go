package jcache_test

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/watchjournal/watchjournal/jcache"
)

// An operator keeps its builder calls; only NewCache changes. Owned
// Secrets are watched as metadata (no Secret data on disk; a typed Secret
// informer would store it sealed, under Options.KeyFiles' key or a key
// made for the process).
func ExampleNewFunc() {
	cfg := ctrl.GetConfigOrDie()
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{
		NewCache: jcache.NewFunc(jcache.Options{Dir: "/var/lib/my-operator"}),
	})
	if err != nil {
		panic(err)
	}
	var r reconcile.Reconciler // the operator's, unchanged: it reads through mgr.GetClient()
	err = ctrl.NewControllerManagedBy(mgr).
		For(&corev1.ConfigMap{}).
		Owns(&corev1.Secret{}, builder.OnlyMetadata).
		Complete(r)
	if err != nil {
		panic(err)
	}
	_ = mgr.Start(ctrl.SetupSignalHandler())
}

// Restart-exact delivery with the builder's shape: a For-like source with
// its predicates and an Owns-like source of the owned Secrets (metadata
// only), both on the cache's journal files, and the reconciler wrapped so
// that both commit only past what reconciled. After a restart the
// controller reconciles what changed while it was down (and the
// RequeueAfter timers that are due), not every object.
func ExampleExact() {
	mgr, err := ctrl.NewManager(ctrl.GetConfigOrDie(), ctrl.Options{
		NewCache: jcache.NewFunc(jcache.Options{Dir: "/var/lib/my-operator"}),
	})
	if err != nil {
		panic(err)
	}
	var r reconcile.Reconciler // the operator's
	ex := jcache.Exact(mgr.GetCache(), "mirror")
	ownedSecrets := &metav1.PartialObjectMetadata{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Secret"}}
	err = ctrl.NewControllerManagedBy(mgr).Named("mirror").
		// Predicates go here: WithEventFilter does not apply to raw sources.
		WatchesRawSource(ex.Kind(&corev1.ConfigMap{}, &handler.EnqueueRequestForObject{},
			predicate.NewPredicateFuncs(func(o client.Object) bool { return o.GetLabels()["mirror"] == "yes" }))).
		WatchesRawSource(ex.Kind(ownedSecrets,
						handler.EnqueueRequestForOwner(mgr.GetScheme(), mgr.GetRESTMapper(), &corev1.ConfigMap{}, handler.OnlyControllerOwner()))).
		Complete(ex.Reconciler(r)) // required: unwrapped, the manager's Start fails with ErrExactNotWrapped
	if err != nil {
		panic(err)
	}
	_ = mgr.Start(ctrl.SetupSignalHandler())
}

// Leader election with a warm standby: every replica (its own volume for
// the cache Dir) keeps its cache's files current; the leader publishes
// each Exact source's position on the Lease "mirror-position", and a new
// leader starts from its own files there, reconciling what changed since
// the old leader's last publish instead of every object.
func ExampleExactController_AddToManager() {
	mgr, err := ctrl.NewManager(ctrl.GetConfigOrDie(), ctrl.Options{
		NewCache:                      jcache.NewFunc(jcache.Options{Dir: "/var/lib/my-operator"}),
		LeaderElection:                true,
		LeaderElectionID:              "mirror-leader",
		LeaderElectionNamespace:       "mirror-system",
		LeaderElectionReleaseOnCancel: true, // a graceful stop publishes the final position, then releases
	})
	if err != nil {
		panic(err)
	}
	var r reconcile.Reconciler // the operator's
	ex := jcache.ExactWith(mgr.GetCache(), "mirror", jcache.ExactOptions{
		Standby: &jcache.Standby{Namespace: "mirror-system", Name: "mirror-position",
			LeaderElectionID: "mirror-leader"}}) // the manager's: its term fences the publishes
	if err := ex.AddToManager(mgr); err != nil { // the publisher (leader) and follower (every replica)
		panic(err)
	}
	err = ctrl.NewControllerManagedBy(mgr).Named("mirror").
		WatchesRawSource(ex.Kind(&corev1.ConfigMap{}, &handler.EnqueueRequestForObject{})).
		Complete(ex.Reconciler(r))
	if err != nil {
		panic(err)
	}
	_ = mgr.Start(ctrl.SetupSignalHandler())
}
