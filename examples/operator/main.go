// Command operator is an example operator on watchjournal: it mirrors one
// data key of every ConfigMap in a namespace into a status ConfigMap, fed
// by a watchjournal journal through package crsource instead of an
// informer.
//
// What it shows: after a restart (a crash included) it reconciles exactly
// the ConfigMaps that changed while it was down, plus those whose events it
// had not finished reconciling — not every object, as an informer-based
// operator does after each restart. Deletes that happened while it was down
// arrive as requests like any other.
//
// Usage:
//
//	operator --kubeconfig KUBECONFIG -n NAMESPACE --db cm.db [--key value]
//	         [--status-namespace NS] [--status-name mirror-status]
//
// It prints one line per reconcile ("reconcile <ns>/<name>"), one per
// commit ("committed <offset> head <offset>") and one per GET of a single
// ConfigMap it sends to the apiserver ("get configmap <ns>/<name>") on
// stdout, for tests and for the curious; logs go to stderr. Reconcile
// reads the ConfigMaps it mirrors from the journal file (package
// journal/cache), so the only GETs are of the status ConfigMap it writes.
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
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/watchjournal/watchjournal/crsource"
	"github.com/watchjournal/watchjournal/journal"
	"github.com/watchjournal/watchjournal/journal/cache"
)

func main() {
	var (
		namespace  = flag.String("n", "default", "namespace whose ConfigMaps are mirrored")
		db         = flag.String("db", "operator.db", "journal file")
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
	if err := run(*namespace, *db, *key, *statusNS, *statusName); err != nil {
		fmt.Fprintln(os.Stderr, "operator:", err)
		os.Exit(1)
	}
}

func run(namespace, db, key, statusNS, statusName string) error {
	ctrl.SetLogger(logr.Discard())
	cfg, err := ctrl.GetConfig()
	if err != nil {
		return err
	}
	cfg.Wrap(printGets)
	zl, _ := zap.NewProduction()
	log := zapr.NewLogger(zl) // the library logs through logr; zap is this program's backend
	src, err := crsource.New(cfg, crsource.Options{
		Path:     db,
		Resource: journal.Resource{GVR: schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}, Namespace: namespace},
		Loop:     crsource.LoopOptions{Logger: log},
	})
	if err != nil {
		return err
	}
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{Metrics: metricsserver.Options{BindAddress: "0"}, HealthProbeBindAddress: "0"})
	if err != nil {
		return err
	}
	// The one line that replaces the informer cache: reads of the watched
	// ConfigMaps come from the journal file.
	objects := cache.NewReader(src.Journal(), mgr.GetScheme())
	m := &mirror{objects: objects, reader: mgr.GetAPIReader(), writer: mgr.GetClient(), key: key,
		status: client.ObjectKey{Namespace: statusNS, Name: statusName}}
	if err := ctrl.NewControllerManagedBy(mgr).Named("mirror").
		WatchesRawSource(src).
		Complete(src.Reconciler(m)); err != nil {
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
// the ConfigMaps from the journal (objects: no informer cache, no GET) and
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

// reportCommits prints the consumer's committed offset and the journal's
// head whenever either moves.
func reportCommits(src *crsource.Source) manager.RunnableFunc {
	return func(ctx context.Context) error {
		var last string
		_ = wait.PollUntilContextCancel(ctx, 100*time.Millisecond, false, func(context.Context) (bool, error) {
			c, err1 := src.Committed()
			h, err2 := src.Journal().Head()
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
