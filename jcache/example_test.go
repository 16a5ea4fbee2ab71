package jcache_test

import (
	corev1 "k8s.io/api/core/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/watchjournal/watchjournal/jcache"
)

// An operator keeps its builder calls; only NewCache changes. Owned
// Secrets are watched as metadata (no Secret data on disk; with
// Options.SecretPayloads and KeyFiles it would be stored sealed).
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
