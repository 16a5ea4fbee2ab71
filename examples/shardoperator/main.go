// Command shardoperator is an example operator run as several replicas of
// one shard group (docs/sharding.md, "Sharded controllers on the disk
// cache"): each replica's disk cache (package jcache, Options.Shard) gives
// its controller only the ConfigMaps and Secrets of its hash range, so
// each ConfigMap is reconciled by one replica and no leader election is
// needed. The ConfigMaps, the For resource, are the group's owners
// (ShardOptions.Owners): each replica's file of them journals only its
// range, so lists, watches, disk and memory are divided among the
// replicas too; the Secrets are kept whole on every replica.
//
// For every ConfigMap with the label example.watchjournal.io/secret=true
// it keeps an owned Secret "<name>-secret" (For the ConfigMaps, Owns the
// Secrets as metadata only). A Secret hashes by its controller owner's
// UID, so its events reach the replica that holds its ConfigMap.
//
// Usage:
//
//	shardoperator --kubeconfig KUBECONFIG --dir DIR --shard-member NAME
//	              [--shard-group shardoperator] [--shard-namespace NS]
//	              [--lease-duration 15s]
//	              [--metrics-bind-address 0] [--health-probe-bind-address 0]
//
// Each replica needs its own --dir and a --shard-member unique in the
// group and stable across its restarts (a StatefulSet's pod name). It
// prints one line per reconcile on stdout: "reconcile <ns>/<name>" for a
// ConfigMap it holds, "not-held <ns>/<name>" for a request queued before
// its ConfigMap moved to another replica (left to that one), "gone
// <ns>/<name>" for one deleted; logs go to stderr. A replica reads only
// the ConfigMaps it holds, so a NotFound is a deletion or a move: the
// apiserver tells which (reconcileAbsent).
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/watchjournal/watchjournal/jcache"
)

// label marks the ConfigMaps that get a Secret.
const label = "example.watchjournal.io/secret"

// flags are the command line's settings.
type flags struct {
	dir                    string
	group, member, ns      string
	leaseDuration          time.Duration
	metricsAddr, probeAddr string
}

func main() {
	var f flags
	flag.StringVar(&f.dir, "dir", "shardoperator", "directory of the cache's journal files")
	flag.StringVar(&f.group, "shard-group", "shardoperator", "the shard group's name")
	flag.StringVar(&f.member, "shard-member", "", "this replica's name in the group: unique, stable across restarts (default: host name and pid)")
	flag.StringVar(&f.ns, "shard-namespace", "default", "namespace of the group's Leases")
	flag.DurationVar(&f.leaseDuration, "lease-duration", 15*time.Second, "how long a dead replica's range waits before the others take it")
	flag.StringVar(&f.metricsAddr, "metrics-bind-address", "0", "address of the metrics endpoint; 0 turns it off")
	flag.StringVar(&f.probeAddr, "health-probe-bind-address", "0", "address of the probes; 0 turns them off")
	flag.Parse()
	ctrl.SetLogger(zap.New(zap.WriteTo(os.Stderr)))
	if err := run(ctrl.SetupSignalHandler(), f); err != nil {
		fmt.Fprintln(os.Stderr, "shardoperator:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, f flags) error {
	mgr, err := ctrl.NewManager(ctrl.GetConfigOrDie(), ctrl.Options{
		NewCache: jcache.NewFunc(jcache.Options{Dir: f.dir, Shard: &jcache.ShardOptions{
			Group: f.group, Member: f.member, Namespace: f.ns,
			Resources:     []schema.GroupResource{{Resource: "configmaps"}, {Resource: "secrets"}},
			Owners:        []schema.GroupResource{{Resource: "configmaps"}}, // journal only this replica's ConfigMaps
			LeaseDuration: f.leaseDuration,
		}}),
		Metrics:                metricsserver.Options{BindAddress: f.metricsAddr},
		HealthProbeBindAddress: f.probeAddr,
	})
	if err != nil {
		return err
	}
	labeled, err := predicate.LabelSelectorPredicate(metav1.LabelSelector{MatchLabels: map[string]string{label: "true"}})
	if err != nil {
		return err
	}
	if err := ctrl.NewControllerManagedBy(mgr).Named("secrets").
		// Each replica is the only reconciler of its range.
		WithOptions(controller.Options{NeedLeaderElection: ptr.To(false)}).
		For(&corev1.ConfigMap{}, builder.WithPredicates(labeled)).
		Owns(&corev1.Secret{}, builder.OnlyMetadata).
		Complete(&secrets{c: mgr.GetClient(), api: mgr.GetAPIReader(), cache: mgr.GetCache().(*jcache.Cache)}); err != nil {
		return err
	}
	return mgr.Start(ctx)
}

// secrets keeps a Secret "<name>-secret" for each labeled ConfigMap the
// replica holds.
type secrets struct {
	c     client.Client // reads from the cache: the ConfigMaps of the range
	api   client.Reader // reads from the apiserver
	cache *jcache.Cache
}

func (s *secrets) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	var cm corev1.ConfigMap
	if err := s.c.Get(ctx, req.NamespacedName, &cm); apierrors.IsNotFound(err) {
		return reconcile.Result{}, s.reconcileAbsent(ctx, req)
	} else if err != nil {
		return reconcile.Result{}, err
	}
	if !s.cache.Holds(&cm) {
		// Queued before the ConfigMap moved to another replica, which
		// reconciles it.
		fmt.Printf("not-held %s\n", req.NamespacedName)
		return reconcile.Result{}, nil
	}
	fmt.Printf("reconcile %s\n", req.NamespacedName)
	if cm.Labels[label] != "true" {
		return reconcile.Result{}, nil
	}
	sec := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: cm.Namespace, Name: cm.Name + "-secret"},
		StringData: map[string]string{"owner": cm.Name},
	}
	if err := controllerutil.SetControllerReference(&cm, sec, s.c.Scheme()); err != nil {
		return reconcile.Result{}, err
	}
	if err := s.c.Create(ctx, sec); err != nil && !apierrors.IsAlreadyExists(err) {
		return reconcile.Result{}, err
	}
	return reconcile.Result{}, nil
}

// reconcileAbsent handles a ConfigMap the cache does not have. The cache
// holds only this replica's range of ConfigMaps (ShardOptions.Owners), so
// the ConfigMap was deleted, or it moved to another replica after its
// request was queued here; that one reconciles it. Nothing is done either
// way (a deleted ConfigMap's Secret goes with it, by its ownerReference);
// one read of its metadata from the apiserver tells which to print.
func (s *secrets) reconcileAbsent(ctx context.Context, req reconcile.Request) error {
	var live metav1.PartialObjectMetadata
	live.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("ConfigMap"))
	switch err := s.api.Get(ctx, req.NamespacedName, &live); {
	case apierrors.IsNotFound(err):
		fmt.Printf("gone %s\n", req.NamespacedName)
	case err != nil:
		return err
	default:
		fmt.Printf("not-held %s\n", req.NamespacedName)
	}
	return nil
}
