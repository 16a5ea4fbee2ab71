// Command cacheoperator is an example operator written for
// controller-runtime's manager cache, unchanged but for one line: its
// cache keeps every object in journal files on disk (package jcache).
//
// For every ConfigMap with the label example.watchjournal.io/secret=true
// it keeps an owned Secret "<name>-secret". It uses the plain builder:
// For (the ConfigMaps), Owns (the Secrets, as metadata only: no Secret
// data on disk), Watches (ServiceAccounts, mapped to the ConfigMaps whose
// data["serviceAccount"] names them, through a field index of the cache),
// and reads through mgr.GetClient().
//
// Usage:
//
//	cacheoperator --kubeconfig KUBECONFIG -n NAMESPACE --dir DIR
//
// It prints one line per reconcile ("reconcile <ns>/<name>") on stdout;
// logs go to stderr.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	crcache "sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/watchjournal/watchjournal/jcache"
)

// label marks the ConfigMaps that get a Secret.
const label = "example.watchjournal.io/secret"

// saIndex indexes ConfigMaps by data["serviceAccount"].
const saIndex = "data.serviceAccount"

func main() {
	namespace := flag.String("n", "default", "namespace the operator watches")
	dir := flag.String("dir", "cacheoperator", "directory of the cache's journal files")
	flag.Parse()
	ctrl.SetLogger(zap.New(zap.WriteTo(os.Stderr)))
	if err := run(*namespace, *dir); err != nil {
		fmt.Fprintln(os.Stderr, "cacheoperator:", err)
		os.Exit(1)
	}
}

func run(namespace, dir string) error {
	cfg, err := ctrl.GetConfig()
	if err != nil {
		return err
	}
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{
		// The one line: the manager's cache is on disk.
		NewCache: jcache.NewFunc(jcache.Options{Dir: dir}),
		Cache:    crcache.Options{DefaultNamespaces: map[string]crcache.Config{namespace: {}}},

		Metrics:                metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0",
	})
	if err != nil {
		return err
	}
	ctx := ctrl.SetupSignalHandler()
	if err := mgr.GetFieldIndexer().IndexField(ctx, &corev1.ConfigMap{}, saIndex, func(o client.Object) []string {
		if sa := o.(*corev1.ConfigMap).Data["serviceAccount"]; sa != "" {
			return []string{sa}
		}
		return nil
	}); err != nil {
		return err
	}
	c := mgr.GetClient()
	bySA := handler.EnqueueRequestsFromMapFunc(func(ctx context.Context, sa client.Object) []reconcile.Request {
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
	})
	labelled, err := predicate.LabelSelectorPredicate(metav1.LabelSelector{MatchLabels: map[string]string{label: "true"}})
	if err != nil {
		return err
	}
	if err := ctrl.NewControllerManagedBy(mgr).Named("secrets").
		For(&corev1.ConfigMap{}, builder.WithPredicates(labelled)).
		Owns(&corev1.Secret{}, builder.OnlyMetadata).
		Watches(&corev1.ServiceAccount{}, bySA).
		Complete(&secrets{c: c}); err != nil {
		return err
	}
	return mgr.Start(ctx)
}

// secrets keeps a Secret "<name>-secret" for each labelled ConfigMap.
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
