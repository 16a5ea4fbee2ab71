// Command cacheoperator is an example operator in the shape of a
// production one, on controller-runtime's builder with watchjournal
// underneath: the manager's cache keeps every object in journal files on
// disk (package jcache), and the controller's sources are restart-exact
// (jcache.Exact): after a restart, a crash included, it reconciles what
// changed while it was down, not every object.
//
// For every ConfigMap with the label example.watchjournal.io/secret=true
// it keeps an owned Secret "<name>-secret". Its controller has three
// sources over the cache's journal files (one watch per resource, the
// cache's): a For-like one (the labeled ConfigMaps), an Owns-like one (the
// Secrets, as metadata only: no Secret data on disk, mapped to their owner
// by handler.EnqueueRequestForOwner) and a Watches-like one
// (ServiceAccounts, mapped to the ConfigMaps whose data["serviceAccount"]
// names them, through a field index of the cache). It reads through
// mgr.GetClient().
//
// Production setup, in run (docs/exact.md, "The production setup", shows
// run as it is; docs_test.go checks that they agree): journal retention (on by
// default, jcache.DefaultRetention), the cache's watchjournal_* metrics on
// the manager's metrics endpoint (jcache.RegisterMetrics), healthz and
// readyz checks of the journals (jcache.HealthzCheck, jcache.ReadyzCheck)
// and leader election (on by default; the cache runs on every replica, the
// controller on the leader).
//
// Usage:
//
//	cacheoperator --kubeconfig KUBECONFIG --dir DIR
//	              [--leader-elect=true] [--leader-election-namespace NS]
//	              [--metrics-bind-address :8080] [--health-probe-bind-address :8081]
//
// It watches all namespaces (an Exact source needs one journal file per
// kind, and a cache restricted to namespaces has one informer per
// namespace: jcache.ErrExactCache). --leader-election-namespace is needed
// outside a cluster. It prints one line per reconcile ("reconcile
// <ns>/<name>") on stdout; logs go to stderr.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/watchjournal/watchjournal/jcache"
)

// label marks the ConfigMaps that get a Secret.
const label = "example.watchjournal.io/secret"

// saIndex indexes ConfigMaps by data["serviceAccount"].
const saIndex = "data.serviceAccount"

// flags are the command line's settings.
type flags struct {
	dir                    string // the cache's journal files: a persistent volume in a cluster
	leaderElect            bool
	leaderElectionNS       string
	metricsAddr, probeAddr string
}

// positionNS is the namespace of the warm standby's position Lease: the
// leader election Lease's, which in a cluster defaults to the pod's own
// (the service account's namespace file, as controller-runtime reads it).
func (f flags) positionNS() string {
	if f.leaderElectionNS != "" {
		return f.leaderElectionNS
	}
	b, _ := os.ReadFile("/var/run/secrets/kubernetes.io/serviceaccount/namespace")
	return strings.TrimSpace(string(b))
}

func main() {
	var f flags
	// --kubeconfig is controller-runtime's flag (ctrl.GetConfig also reads
	// $KUBECONFIG and the in-cluster config).
	flag.StringVar(&f.dir, "dir", "cacheoperator", "directory of the cache's journal files")
	flag.BoolVar(&f.leaderElect, "leader-elect", true, "run the controller only on the replica that holds the leader election Lease")
	flag.StringVar(&f.leaderElectionNS, "leader-election-namespace", "", "namespace of the leader election Lease (default: the pod's, in a cluster)")
	flag.StringVar(&f.metricsAddr, "metrics-bind-address", ":8080", "address of the metrics endpoint (/metrics); 0 turns it off")
	flag.StringVar(&f.probeAddr, "health-probe-bind-address", ":8081", "address of the probes (/healthz, /readyz); 0 turns them off")
	flag.Parse()
	ctrl.SetLogger(zap.New(zap.WriteTo(os.Stderr)))
	if err := run(ctrl.SetupSignalHandler(), f); err != nil {
		fmt.Fprintln(os.Stderr, "cacheoperator:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, f flags) error {
	mgr, err := ctrl.NewManager(ctrl.GetConfigOrDie(), ctrl.Options{
		// The cache keeps its objects in journal files in f.dir; retention
		// is on by default (jcache.DefaultRetention: 64 MiB of events per
		// file beyond what the handlers and sources have been given).
		NewCache:                      jcache.NewFunc(jcache.Options{Dir: f.dir}),
		LeaderElection:                f.leaderElect,
		LeaderElectionID:              "cacheoperator.example.watchjournal.io",
		LeaderElectionNamespace:       f.leaderElectionNS,
		LeaderElectionReleaseOnCancel: true, // a stopping leader hands over at once
		Metrics:                       metricsserver.Options{BindAddress: f.metricsAddr},
		HealthProbeBindAddress:        f.probeAddr,
	})
	if err != nil {
		return err
	}
	if err := mgr.GetFieldIndexer().IndexField(ctx, &corev1.ConfigMap{}, saIndex, serviceAccountOf); err != nil {
		return err
	}
	labeled, err := predicate.LabelSelectorPredicate(metav1.LabelSelector{MatchLabels: map[string]string{label: "true"}})
	if err != nil {
		return err
	}
	// Restart-exact sources over the cache's journal files: each commits
	// its position only past events whose requests reconciled.
	// Under leader election every replica is a warm standby: the leader
	// publishes each source's position on a Lease of its own, and the next
	// leader starts from its own cache's files there.
	opts := jcache.ExactOptions{}
	if f.leaderElect {
		opts.Standby = &jcache.Standby{Namespace: f.positionNS(), Name: "cacheoperator-position",
			LeaderElectionID: "cacheoperator.example.watchjournal.io"} // the manager's: its term fences the publishes
	}
	ex := jcache.ExactWith(mgr.GetCache(), "secrets", opts)
	if f.leaderElect {
		if err := ex.AddToManager(mgr); err != nil {
			return err
		}
	}
	secret := &metav1.PartialObjectMetadata{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Secret"}}
	if err := ctrl.NewControllerManagedBy(mgr).Named("secrets").
		// For(&corev1.ConfigMap{}, builder.WithPredicates(labeled))
		WatchesRawSource(ex.Kind(&corev1.ConfigMap{}, &handler.EnqueueRequestForObject{}, labeled)).
		// Owns(&corev1.Secret{}, builder.OnlyMetadata)
		WatchesRawSource(ex.Kind(secret, handler.EnqueueRequestForOwner(mgr.GetScheme(), mgr.GetRESTMapper(),
			&corev1.ConfigMap{}, handler.OnlyControllerOwner()))).
		// Watches(&corev1.ServiceAccount{}, handler.EnqueueRequestsFromMapFunc(...))
		WatchesRawSource(ex.Kind(&corev1.ServiceAccount{}, handler.EnqueueRequestsFromMapFunc(configMapsOf(mgr.GetClient())))).
		Complete(ex.Reconciler(&secrets{c: mgr.GetClient()})); err != nil { // the wrapper is required
		return err
	}
	// watchjournal_* series of every journal file of the cache, on the
	// manager's /metrics.
	if err := jcache.RegisterMetrics(ctrlmetrics.Registry, mgr.GetCache()); err != nil {
		return err
	}
	// /healthz fails once a journal's loop stopped on a fatal error;
	// /readyz until each is synced, and while one fails past the bound.
	kinds := []client.Object{&corev1.ConfigMap{}, secret, &corev1.ServiceAccount{}}
	if err := mgr.AddHealthzCheck("journals", jcache.HealthzCheck(mgr.GetCache(), kinds...)); err != nil {
		return err
	}
	if err := mgr.AddReadyzCheck("journals", jcache.ReadyzCheck(mgr.GetCache(), 0, kinds...)); err != nil {
		return err
	}
	return mgr.Start(ctx)
}

// serviceAccountOf is the index function of saIndex.
func serviceAccountOf(o client.Object) []string {
	if sa := o.(*corev1.ConfigMap).Data["serviceAccount"]; sa != "" {
		return []string{sa}
	}
	return nil
}

// configMapsOf maps a ServiceAccount to the ConfigMaps that name it,
// listed through the cache's index.
func configMapsOf(c client.Client) handler.MapFunc {
	return func(ctx context.Context, sa client.Object) []reconcile.Request {
		var l corev1.ConfigMapList
		if err := c.List(ctx, &l, client.InNamespace(sa.GetNamespace()), client.MatchingFields{saIndex: sa.GetName()}); err != nil {
			ctrl.Log.Error(err, "list ConfigMaps by ServiceAccount")
			return nil
		}
		reqs := make([]reconcile.Request, 0, len(l.Items))
		for i := range l.Items {
			reqs = append(reqs, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(&l.Items[i])})
		}
		return reqs
	}
}

// secrets keeps a Secret "<name>-secret" for each labeled ConfigMap.
type secrets struct{ c client.Client }

func (s *secrets) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	fmt.Printf("reconcile %s\n", req.NamespacedName)
	var cm corev1.ConfigMap
	if err := s.c.Get(ctx, req.NamespacedName, &cm); err != nil {
		return reconcile.Result{}, client.IgnoreNotFound(err) // the Secret goes with its owner
	}
	if cm.Labels[label] != "true" {
		return reconcile.Result{}, nil
	}
	sec := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: cm.Namespace, Name: cm.Name + "-secret"},
		StringData: map[string]string{"serviceAccount": cm.Data["serviceAccount"]},
	}
	if err := controllerutil.SetControllerReference(&cm, sec, s.c.Scheme()); err != nil {
		return reconcile.Result{}, err
	}
	if err := s.c.Create(ctx, sec); err != nil && !apierrors.IsAlreadyExists(err) {
		return reconcile.Result{}, err
	}
	return reconcile.Result{}, nil
}
