// Command operator is the smallest restart-exact operator on watchjournal:
// one controller with one source. It mirrors one data key of every
// ConfigMap in a namespace into a status ConfigMap. The manager's cache is
// the journal cache (package jcache: its objects in journal files on
// disk), and the controller's source is jcache.Exact's, in place of
// For(&corev1.ConfigMap{}).
//
// What it shows: after a restart, a SIGKILL in the middle of a stream of
// changes included, it reconciles exactly the ConfigMaps that changed
// while it was down plus those whose events it had not finished
// reconciling, not every object as an informer-based operator does after
// each restart. Deletes made while it was down arrive as requests like any
// other. examples/cacheoperator is the production shape (For, Owns and
// Watches sources, metrics, probes, leader election and a warm standby).
//
// Usage:
//
//	operator --kubeconfig KUBECONFIG -n NAMESPACE --dir DIR [--key value]
//	         [--status-namespace NS] [--status-name mirror-status]
//
// The cache keeps the ConfigMaps of NAMESPACE only (a field selector on
// metadata.namespace: one journal file, as an Exact source needs). It
// prints one line per reconcile ("reconcile <ns>/<name>"), one whenever
// the source's commit or its journal's head moves ("committed <offset>
// head <offset>") and one per GET of a single ConfigMap it sends to the
// apiserver ("get configmap <ns>/<name>") on stdout, for tests and for the
// curious; logs go to stderr. Reconcile reads the ConfigMaps it mirrors
// through mgr.GetClient(), from the cache's file, so the only GETs are of
// the status ConfigMap it writes.
package main

import (
	"context"
	"flag"
	"fmt"
	"net/http"
	"os"
	"os/signal"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/go-logr/logr"
	"github.com/go-logr/zapr"
	"go.uber.org/zap"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/util/wait"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/watchjournal/watchjournal/jcache"
)

func main() {
	var (
		namespace  = flag.String("n", "default", "namespace whose ConfigMaps are mirrored")
		dir        = flag.String("dir", "operator", "directory of the cache's journal files")
		key        = flag.String("key", "value", "data key mirrored from each ConfigMap")
		statusNS   = flag.String("status-namespace", "", "namespace of the status ConfigMap (default: -n)")
		statusName = flag.String("status-name", "mirror-status", "name of the status ConfigMap")
	)
	flag.Parse()
	if *statusNS == "" {
		*statusNS = *namespace
	}
	// --kubeconfig is controller-runtime's flag (ctrl.GetConfig also reads
	// $KUBECONFIG and the in-cluster config).
	if err := run(*namespace, *dir, *key, *statusNS, *statusName); err != nil {
		fmt.Fprintln(os.Stderr, "operator:", err)
		os.Exit(1)
	}
}

func run(namespace, dir, key, statusNS, statusName string) error {
	cfg, err := ctrl.GetConfig()
	if err != nil {
		return err
	}
	cfg.Wrap(printGets)
	ctrl.SetLogger(logr.Discard())
	zl, _ := zap.NewProduction()
	log := zapr.NewLogger(zl) // the library logs through logr; zap is this program's backend
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{
		// The journal cache in place of the informer cache, holding the
		// ConfigMaps of one namespace.
		NewCache: jcache.NewFunc(jcache.Options{Dir: dir, Logger: log}),
		Cache: cache.Options{ByObject: map[client.Object]cache.ByObject{
			&corev1.ConfigMap{}: {Field: fields.OneTermEqualSelector("metadata.namespace", namespace)},
		}},
		Metrics:                metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0",
	})
	if err != nil {
		return err
	}
	m := &mirror{objects: mgr.GetClient(), reader: mgr.GetAPIReader(), writer: mgr.GetClient(), key: key,
		status: client.ObjectKey{Namespace: statusNS, Name: statusName}}
	// In place of For(&corev1.ConfigMap{}): a source whose position in the
	// cache's file survives restarts, committed only past events whose
	// requests reconciled; the wrapper of the reconciler is required.
	ex := jcache.Exact(mgr.GetCache(), "mirror")
	src := ex.Kind(&corev1.ConfigMap{}, &handler.EnqueueRequestForObject{})
	if err := ctrl.NewControllerManagedBy(mgr).Named("mirror").
		WatchesRawSource(src).
		Complete(ex.Reconciler(m)); err != nil {
		return err
	}
	// Report commits, so that a test can tell when the position is durable.
	if err := mgr.Add(reportCommits(src)); err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	return mgr.Start(ctx)
}

// mirror copies data[key] of each ConfigMap into the status ConfigMap's
// data[<name>], and removes the entry when the ConfigMap is gone. It reads
// the ConfigMaps through the cache (objects: the journal file, no GET) and
// its own status ConfigMap through the API reader (fresh for its update).
type mirror struct {
	objects client.Reader
	reader  client.Reader
	writer  client.Client
	key     string
	status  client.ObjectKey
	mu      sync.Mutex // one status update at a time
}

func (m *mirror) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	if req.NamespacedName == m.status {
		return reconcile.Result{}, nil
	}
	fmt.Printf("reconcile %s\n", req.NamespacedName)
	var cm corev1.ConfigMap
	value, present := "", false
	switch err := m.objects.Get(ctx, req.NamespacedName, &cm); {
	case apierrors.IsNotFound(err):
	case err != nil:
		return reconcile.Result{}, err
	default:
		value, present = cm.Data[m.key], true
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	var st corev1.ConfigMap
	err := m.reader.Get(ctx, m.status, &st)
	if apierrors.IsNotFound(err) {
		st = corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: m.status.Namespace, Name: m.status.Name}}
		if !present {
			return reconcile.Result{}, nil
		}
		st.Data = map[string]string{req.Name: value}
		return reconcile.Result{}, m.writer.Create(ctx, &st)
	}
	if err != nil {
		return reconcile.Result{}, err
	}
	if have, ok := st.Data[req.Name]; ok == present && have == value {
		return reconcile.Result{}, nil
	}
	if st.Data == nil {
		st.Data = map[string]string{}
	}
	if present {
		st.Data[req.Name] = value
	} else {
		delete(st.Data, req.Name)
	}
	return reconcile.Result{}, m.writer.Update(ctx, &st) // a conflict is an error: retried, commit held
}

// reportCommits prints the source's committed offset and its journal's
// head whenever either moves, once the source has its journal.
func reportCommits(src *jcache.ExactSource) manager.RunnableFunc {
	return func(ctx context.Context) error {
		var last string
		_ = wait.PollUntilContextCancel(ctx, 100*time.Millisecond, false, func(context.Context) (bool, error) {
			j := src.Journal()
			if j == nil {
				return false, nil // not started yet
			}
			c, err1 := src.Committed()
			h, err2 := j.Head()
			if line := fmt.Sprintf("committed %d head %d", c, h); err1 == nil && err2 == nil && line != last {
				fmt.Println(line)
				last = line
			}
			return false, nil // until ctx is done
		})
		return nil
	}
}

// printGets prints a line for every GET of a single ConfigMap the
// operator sends, so that a test can tell which objects it fetched from the
// apiserver.
func printGets(rt http.RoundTripper) http.RoundTripper {
	return roundTripper(func(r *http.Request) (*http.Response, error) {
		if r.Method == http.MethodGet && r.URL.Query().Get("watch") == "" {
			parts := strings.Split(strings.Trim(r.URL.Path, "/"), "/")
			// api/v1/namespaces/<ns>/configmaps/<name>
			if len(parts) == 6 && parts[0] == "api" && parts[2] == "namespaces" && parts[4] == "configmaps" {
				fmt.Printf("get configmap %s/%s\n", parts[3], parts[5])
			}
		}
		return rt.RoundTrip(r)
	})
}

type roundTripper func(*http.Request) (*http.Response, error)

func (f roundTripper) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }
