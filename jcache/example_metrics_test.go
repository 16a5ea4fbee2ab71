package jcache_test

import (
	corev1 "k8s.io/api/core/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"

	"github.com/watchjournal/watchjournal/jcache"
)

// The watchjournal_* series of every journal file of the manager's cache
// on the manager's /metrics, and its probes of the files of the kinds the
// controllers read.
func ExampleRegisterMetrics() {
	mgr, err := ctrl.NewManager(ctrl.GetConfigOrDie(), ctrl.Options{
		NewCache:               jcache.NewFunc(jcache.Options{Dir: "/var/lib/my-operator"}),
		HealthProbeBindAddress: ":8081",
	})
	if err != nil {
		panic(err)
	}
	if err := jcache.RegisterMetrics(ctrlmetrics.Registry, mgr.GetCache()); err != nil {
		panic(err)
	}
	if err := mgr.AddReadyzCheck("journals", jcache.ReadyzCheck(mgr.GetCache(), 0, &corev1.ConfigMap{})); err != nil {
		panic(err)
	}
	if err := mgr.AddHealthzCheck("journals", jcache.HealthzCheck(mgr.GetCache(), &corev1.ConfigMap{})); err != nil {
		panic(err)
	}
	_ = mgr.Start(ctrl.SetupSignalHandler())
}
