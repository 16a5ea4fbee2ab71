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
	"github.com/watchjournal/watchjournal/journal/compactor"
	"github.com/watchjournal/watchjournal/reconcile"
)

// maxWait bounds a /wait long poll on the socket.
const maxWait = 30 * time.Second

type watchFlags struct {
	db, kubeconfig, context, logLevel       string
	namespace, labelSelector, fieldSelector string
	allNamespaces, metadataOnly             bool
	secretPayloads                          bool
	pageSize                                int64
	// verifyInterval, idleTimeout and requestTimeout are the
	// reconcile.Options of the same names; 0 means the library's default.
	verifyInterval, idleTimeout, requestTimeout time.Duration
	// retention is the --retain-* flags' retention, nil when none is set:
	// then watch keeps the retention the file records.
	retention *journal.Retention
}

// retentionFlags are the --retain-* flags as given.
type retentionFlags struct {
	events           uint64
	bytes, hardBytes string
	age              time.Duration
}

// parse returns the retention the flags that cmd's command line set give,
// nil when it sets none.
func (rf retentionFlags) parse(cmd *cobra.Command) (*journal.Retention, error) {
	fl := cmd.Flags()
	if !fl.Changed("retain-events") && !fl.Changed("retain-bytes") && !fl.Changed("retain-age") && !fl.Changed("retain-hard-bytes") {
		return nil, nil
	}
	if rf.age < 0 {
		return nil, fmt.Errorf("--retain-age %v: want a duration of 0 or more", rf.age)
	}
	r := journal.Retention{MaxEvents: rf.events, MaxAge: rf.age}
	var err error
	if rf.bytes != "" {
		if r.MaxBytes, err = parseSize("retain-bytes", rf.bytes); err != nil {
			return nil, err
		}
	}
	if rf.hardBytes != "" {
		if r.HardMaxBytes, err = parseSize("retain-hard-bytes", rf.hardBytes); err != nil {
			return nil, err
		}
	}
	return &r, nil
}

func newWatchCmd() *cobra.Command {
	var f watchFlags
	var rf retentionFlags
	cmd := &cobra.Command{
		Use:   "watch RESOURCE --db FILE [-n NS | -A] [-l SELECTOR] [--field-selector S] [--retain-... LIMIT] [--verify-interval D]",
		Short: "Journal one resource's changes into FILE until interrupted",
		Long: "Resolve RESOURCE (configmaps, cm, configmap, deployments.apps, a CRD's plural) through\n" +
			"discovery, then list and watch it into FILE until SIGINT or SIGTERM. The namespace defaults\n" +
			"to the kubeconfig context's, else \"default\"; -A watches all namespaces; cluster-scoped\n" +
			"resources ignore -n. While it runs it serves reads on the unix socket FILE.sock.\n\n" +
			"The --retain-* flags bound the journal: they are recorded in FILE, replacing the retention\n" +
			"it recorded (a limit not given is none; --retain-events 0 alone removes every limit), and\n" +
			"enforced while the watch runs. Without them the watch enforces the retention FILE records.\n" +
			"Retention keeps the events a consumer has not committed, up to --retain-hard-bytes.\n\n" +
			"A Secret's data never reaches FILE without --secret-payloads: Secrets keep metadata only.\n" +
			"--verify-interval relists that often while the watch is healthy and journals what the\n" +
			"watch lost, with origin relist (anti-entropy); journalctl relist asks for one now.",
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) (err error) {
			if f.retention, err = rf.parse(cmd); err != nil {
				return err
			}
			if err := f.checkDurations(); err != nil {
				return err
			}
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
	fl.BoolVar(&f.metadataOnly, "metadata-only", false, "keep only kind, apiVersion and metadata of each object (recorded in the file; always on for Secrets without --secret-payloads)")
	fl.BoolVar(&f.secretPayloads, "secret-payloads", false, "journal the data of Secrets; by default a Secret's data never reaches the journal: metadata only")
	fl.DurationVar(&f.verifyInterval, "verify-interval", 0, "relist every `DURATION` and journal what the watch lost (anti-entropy); 0: off")
	fl.DurationVar(&f.idleTimeout, "idle-timeout", 0, "replace a watch that delivers nothing for `DURATION`, on a new connection (0: 2m)")
	fl.DurationVar(&f.requestTimeout, "request-timeout", 0, "bound each list page request to `DURATION` (0: 60s)")
	fl.StringVar(&f.logLevel, "log-level", "info", "log `LEVEL`: debug, info, warn or error")
	fl.Uint64Var(&rf.events, "retain-events", 0, "retain at most `N` events (0: no limit)")
	fl.StringVar(&rf.bytes, "retain-bytes", "", "retain at most `SIZE` of event payload: bytes, or a quantity like 64Mi or 1Gi")
	fl.DurationVar(&rf.age, "retain-age", 0, "drop events journaled longer ago than `DURATION` (24h)")
	fl.StringVar(&rf.hardBytes, "retain-hard-bytes", "", "payload cap `SIZE` enforced even against consumers that have not committed")
	cmd.MarkFlagsMutuallyExclusive("namespace", "all-namespaces")
	return cmd
}

// checkDurations refuses negative --verify-interval, --idle-timeout and
// --request-timeout: the library would take them as 0.
func (f watchFlags) checkDurations() error {
	for _, d := range []struct {
		flag string
		v    time.Duration
	}{{"verify-interval", f.verifyInterval}, {"idle-timeout", f.idleTimeout}, {"request-timeout", f.requestTimeout}} {
		if d.v < 0 {
			return fmt.Errorf("--%s %v: want a duration of 0 or more", d.flag, d.v)
		}
	}
	return nil
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
	res := journal.Resource{GVR: gvr, LabelSelector: f.labelSelector, FieldSelector: f.fieldSelector,
		MetadataOnly: f.metadataOnly || (gvr.Group == "" && gvr.Resource == "secrets" && !f.secretPayloads)}
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
	loop, err := reconcile.New(cfg, j, reconcile.Options{
		PageSize: f.pageSize, SecretPayloads: f.secretPayloads,
		VerifyInterval: f.verifyInterval, IdleTimeout: f.idleTimeout, RequestTimeout: f.requestTimeout,
		Logger: log,
	})
	if err != nil {
		return err
	}
	policy, err := retention(j, f.retention, log)
	if err != nil {
		return err
	}
	srv := &server{j: j, loop: loop, maxWait: maxWait}
	stop, err := serve(socketPath(f.db), srv.handler(), log)
	if err != nil {
		return err
	}
	defer stop() // before the journal closes: long polls end first
	log.Info("watching", zap.Stringer("resource", res), zap.String("db", f.db), zap.String("socket", socketPath(f.db)))

	// The compactor runs beside the loop until ctx is done, and is stopped
	// before the journal closes. A journal error stops both.
	runCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	compacted := make(chan error, 1)
	if policy == (journal.Retention{}) {
		compacted <- nil
	} else {
		c := compactor.New(j, policy, compactor.Options{Logger: log})
		go func() { // exits when runCtx is done or on a journal error
			err := c.Run(runCtx)
			if err != nil {
				err = fmt.Errorf("retention: %w", err)
				cancel()
			}
			compacted <- err
		}()
	}
	err = loop.Run(runCtx)
	cancel()
	if err = errors.Join(err, <-compacted); err != nil {
		return err
	}
	log.Info("stopped", zap.String("db", f.db))
	return nil
}

// retention records r in j when it is not nil, and returns the retention to
// enforce: r, else the one j records.
func retention(j *journal.Journal, r *journal.Retention, log *zap.Logger) (journal.Retention, error) {
	if r != nil {
		if err := j.SetRetention(*r); err != nil {
			return journal.Retention{}, fmt.Errorf("record retention: %w", err)
		}
	} else {
		stored, err := j.Retention()
		if err != nil {
			return journal.Retention{}, err
		}
		r = &stored
	}
	log.Info("retention", zap.String("retention", formatRetention(*r)))
	return *r, nil
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
