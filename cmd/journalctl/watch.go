package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/spf13/cobra"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/restmapper"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/watchjournal/watchjournal/journal"
	"github.com/watchjournal/watchjournal/reconcile"
)

// maxWait bounds a /wait long poll on the socket.
const maxWait = 30 * time.Second

type watchFlags struct {
	db, kubeconfig, context, logLevel       string
	namespace, labelSelector, fieldSelector string
	allNamespaces, metadataOnly             bool
	pageSize                                int64
}

func newWatchCmd() *cobra.Command {
	var f watchFlags
	cmd := &cobra.Command{
		Use:   "watch RESOURCE --db FILE [-n NS | -A] [-l SELECTOR] [--field-selector S]",
		Short: "Journal one resource's changes into FILE until interrupted",
		Long: "Resolve RESOURCE (configmaps, cm, configmap, deployments.apps, a CRD's plural) through\n" +
			"discovery, then list and watch it into FILE until SIGINT or SIGTERM. The namespace defaults\n" +
			"to the kubeconfig context's, else \"default\"; -A watches all namespaces; cluster-scoped\n" +
			"resources ignore -n. While it runs it serves reads on the unix socket FILE.sock.",
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return runWatch(cmd.Context(), cmd.ErrOrStderr(), args[0], f)
		},
	}
	fl := cmd.Flags()
	addDBFlag(cmd, &f.db)
	fl.StringVar(&f.kubeconfig, "kubeconfig", "", "kubeconfig `PATH` (default: $KUBECONFIG, else ~/.kube/config)")
	fl.StringVar(&f.context, "context", "", "kubeconfig context `NAME` (default: the current context)")
	fl.StringVarP(&f.namespace, "namespace", "n", "", "namespace `NS` to watch (default: the context's, else \"default\")")
	fl.BoolVarP(&f.allNamespaces, "all-namespaces", "A", false, "watch all namespaces")
	fl.StringVarP(&f.labelSelector, "selector", "l", "", "label `SELECTOR`, as kubectl's -l")
	fl.StringVar(&f.fieldSelector, "field-selector", "", "field `SELECTOR`, as kubectl's --field-selector")
	fl.Int64Var(&f.pageSize, "page-size", 500, "objects per list page")
	fl.BoolVar(&f.metadataOnly, "metadata-only", false, "keep metadata only: events carry no object (recommended for secrets)")
	fl.StringVar(&f.logLevel, "log-level", "info", "log `LEVEL`: debug, info, warn or error")
	cmd.MarkFlagsMutuallyExclusive("namespace", "all-namespaces")
	return cmd
}

// runWatch journals the resource arg names until ctx is done, serving reads
// on the file's socket meanwhile; it returns after the journal is closed.
func runWatch(ctx context.Context, stderr io.Writer, arg string, f watchFlags) (err error) {
	log, err := newLogger(stderr, f.logLevel)
	if err != nil {
		return err
	}
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	rules.ExplicitPath = f.kubeconfig
	kc := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, &clientcmd.ConfigOverrides{CurrentContext: f.context})
	cfg, err := kc.ClientConfig()
	if err != nil {
		return fmt.Errorf("kubeconfig: %w", err)
	}
	gvr, namespaced, err := resolve(ctx, cfg, arg, log)
	if err != nil {
		return err
	}
	res := journal.Resource{GVR: gvr, LabelSelector: f.labelSelector, FieldSelector: f.fieldSelector}
	switch {
	case namespaced && !f.allNamespaces && f.namespace != "":
		res.Namespace = f.namespace
	case namespaced && !f.allNamespaces:
		if res.Namespace, _, err = kc.Namespace(); err != nil {
			return err
		}
	case !namespaced && f.namespace != "":
		log.Info("ignoring -n: the resource is cluster-scoped", zap.String("gvr", gvr.String()))
	}

	j, err := journal.Open(f.db, &journal.Options{Resource: &res, Logger: log})
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, j.Close()) }()
	loop, err := reconcile.New(cfg, j, reconcile.Options{PageSize: f.pageSize, MetadataOnly: f.metadataOnly, Logger: log})
	if err != nil {
		return err
	}
	srv := &server{j: j, status: loop.Status, maxWait: maxWait}
	stop, err := serve(socketPath(f.db), srv.handler(), log)
	if err != nil {
		return err
	}
	defer stop() // before the journal closes: long polls end first
	log.Info("watching", zap.Stringer("resource", res), zap.String("db", f.db), zap.String("socket", socketPath(f.db)))
	if err := loop.Run(ctx); err != nil {
		return err
	}
	log.Info("stopped", zap.String("db", f.db))
	return nil
}

// resolve maps a resource argument to its GVR as kubectl does, through
// memory-cached discovery: a fully specified resource.version.group first,
// then resource[.group] with short names (cm) and singulars (configmap)
// expanded. It also reports whether the resource is namespaced.
func resolve(ctx context.Context, cfg *rest.Config, arg string, log *zap.Logger) (schema.GroupVersionResource, bool, error) {
	dc, err := discovery.NewDiscoveryClientForConfig(cfg)
	if err != nil {
		return schema.GroupVersionResource{}, false, err
	}
	cached := memory.NewMemCacheClientWithContext(dc)
	warn := func(msg string) { log.Warn(msg, zap.String("resource", arg)) }
	mapper := restmapper.NewShortcutExpanderWithContext(restmapper.NewDeferredDiscoveryRESTMapperWithContext(cached), cached, warn)

	full, gr := schema.ParseResourceArg(arg)
	var gvk schema.GroupVersionKind
	if full != nil {
		gvk, _ = mapper.KindForWithContext(ctx, *full)
	}
	if gvk.Empty() {
		if gvk, err = mapper.KindForWithContext(ctx, gr.WithVersion("")); err != nil {
			return schema.GroupVersionResource{}, false, fmt.Errorf("resource %q: %w", arg, err)
		}
	}
	m, err := mapper.RESTMappingWithContext(ctx, gvk.GroupKind(), gvk.Version)
	if err != nil {
		return schema.GroupVersionResource{}, false, fmt.Errorf("resource %q: %w", arg, err)
	}
	return m.Resource, m.Scope.Name() == meta.RESTScopeNameNamespace, nil
}

// newLogger returns a console logger to w at level, in the production
// encoder's fields with ISO 8601 times.
func newLogger(w io.Writer, level string) (*zap.Logger, error) {
	lvl, err := zapcore.ParseLevel(level)
	if err != nil {
		return nil, fmt.Errorf("--log-level: %w", err)
	}
	enc := zap.NewProductionEncoderConfig()
	enc.EncodeTime = zapcore.ISO8601TimeEncoder
	return zap.New(zapcore.NewCore(zapcore.NewConsoleEncoder(enc), zapcore.Lock(zapcore.AddSync(w)), lvl)), nil
}
