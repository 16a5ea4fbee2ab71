package jcache_test

import (
	"context"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	toolscache "k8s.io/client-go/tools/cache"
	ctrl "sigs.k8s.io/controller-runtime"
	crcache "sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/watchjournal/watchjournal/internal/testing/controlplane"
	"github.com/watchjournal/watchjournal/jcache"
)

// pathWords are namespaces named like the words of a request path.
var pathWords = []string{"api", "apis", "watch", "namespaces"}

// pathWordsSetup starts an apiserver with the pathWords namespaces and
// returns the cache options that watch ConfigMaps in each of them (one
// informer per namespace, each listing .../namespaces/NS/configmaps).
func pathWordsSetup(t *testing.T) (*controlplane.ControlPlane, kubernetes.Interface, crcache.Options) {
	cp := controlplane.StartT(t, controlplane.Options{})
	kube := kubernetes.NewForConfigOrDie(cp.RESTConfig())
	opts := crcache.Options{DefaultNamespaces: map[string]crcache.Config{}}
	for _, ns := range pathWords {
		createNamespace(t, kube, ns)
		opts.DefaultNamespaces[ns] = crcache.Config{}
	}
	return cp, kube, opts
}

// updateEach sets data k=2 in ConfigMap "a" of each pathWords namespace.
func updateEach(t *testing.T, kube kubernetes.Interface) {
	t.Helper()
	ctx := context.Background()
	for _, ns := range pathWords {
		updateCM(t, ctx, kube, ns, "a", func(cm *corev1.ConfigMap) {
			cm.Data = map[string]string{"k": "2"}
		})
	}
}

// deleteEach deletes ConfigMap "a" of each pathWords namespace.
func deleteEach(t *testing.T, kube kubernetes.Interface) {
	t.Helper()
	for _, ns := range pathWords {
		if err := kube.CoreV1().ConfigMaps(ns).Delete(context.Background(), "a", metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
	}
}

// TestCache_NamespacesNamedLikePathWords: an informer over ConfigMaps in
// namespaces api, apis, watch and namespaces syncs and its handler gets
// each add, update and delete.
func TestCache_NamespacesNamedLikePathWords(t *testing.T) {
	cp, kube, opts := pathWordsSetup(t)
	for _, ns := range pathWords {
		createCM(t, kube, ns, "a", nil, map[string]string{"k": "1"})
	}
	r := startCache(t, jcache.NewFunc(jcache.Options{Dir: t.TempDir(), NoSync: true}), opts, cp)
	defer r.stop()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	inf := getInformer(t, ctx, r.c, &corev1.ConfigMap{})
	rec := newRecorder()
	if _, err := inf.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
		AddFunc: func(o any) { cm := o.(*corev1.ConfigMap); rec.add("add " + cm.Namespace + "/" + cm.Name) },
		UpdateFunc: func(_, o any) {
			cm := o.(*corev1.ConfigMap)
			rec.add("update " + cm.Namespace + "/" + cm.Name + " " + cm.Data["k"])
		},
		DeleteFunc: func(o any) {
			if d, ok := o.(toolscache.DeletedFinalStateUnknown); ok {
				o = d.Obj
			}
			cm := o.(*corev1.ConfigMap)
			rec.add("delete " + cm.Namespace + "/" + cm.Name)
		},
	}); err != nil {
		t.Fatal(err)
	}
	var adds, changes []string
	for _, ns := range pathWords {
		adds = append(adds, "add "+ns+"/a")
		changes = append(changes, "update "+ns+"/a 2", "delete "+ns+"/a")
	}
	rec.waitFor(t, "the adds", hasAll(adds...))
	updateEach(t, kube)
	deleteEach(t, kube)
	rec.waitFor(t, "the updates and deletes", hasAll(changes...))
}

// TestManager_NamespacesNamedLikePathWords: a manager with jcache.NewFunc
// over ConfigMaps in namespaces api, apis, watch and namespaces starts,
// reconciles each ConfigMap, and its client reads each add, update and
// delete.
func TestManager_NamespacesNamedLikePathWords(t *testing.T) {
	cp, kube, opts := pathWordsSetup(t)
	mgr := newManager(t, cp.RESTConfig(), ctrl.Options{
		Cache:    opts,
		NewCache: jcache.NewFunc(jcache.Options{Dir: t.TempDir(), NoSync: true}),
	})
	rec := newRecorder()
	if err := ctrl.NewControllerManagedBy(mgr).Named("pathwords").For(&corev1.ConfigMap{}).
		Complete(reconcile.Func(func(_ context.Context, req reconcile.Request) (reconcile.Result, error) {
			rec.add("reconcile " + req.String())
			return reconcile.Result{}, nil
		})); err != nil {
		t.Fatal(err)
	}
	defer runManager(t, mgr).stop()
	// The sync, the reads and the polls below, within 30 s.
	wctx, wcancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer wcancel()
	if !mgr.GetCache().WaitForCacheSync(wctx) {
		t.Fatal("the manager's cache did not sync")
	}
	var reconciles []string
	for _, ns := range pathWords {
		createCM(t, kube, ns, "a", nil, map[string]string{"k": "1"})
		reconciles = append(reconciles, "reconcile "+ns+"/a")
	}
	rec.waitFor(t, "a reconcile of each ConfigMap", hasAll(reconciles...))
	// what the manager's client reads of ns/a: its data, or "gone".
	read := func(ns string) string {
		var cm corev1.ConfigMap
		err := mgr.GetClient().Get(wctx, client.ObjectKey{Namespace: ns, Name: "a"}, &cm)
		switch {
		case apierrors.IsNotFound(err):
			return "gone"
		case err != nil:
			return err.Error()
		}
		return cm.Data["k"]
	}
	for _, ns := range pathWords {
		if got := read(ns); got != "1" {
			t.Fatalf("Get %s/a = %q, want data 1", ns, got)
		}
	}
	// waitRead waits until the client reads want for ns/a in each
	// namespace.
	waitRead := func(want string) {
		t.Helper()
		for _, ns := range pathWords {
			if err := wait.PollUntilContextCancel(wctx, 10*time.Millisecond, true, func(context.Context) (bool, error) {
				return read(ns) == want, nil
			}); err != nil {
				t.Fatalf("Get %s/a = %q, want %q", ns, read(ns), want)
			}
		}
	}
	updateEach(t, kube)
	waitRead("2")
	deleteEach(t, kube)
	waitRead("gone")
}
