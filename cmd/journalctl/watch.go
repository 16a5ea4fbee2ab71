package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/go-logr/zapr"
	"github.com/spf13/cobra"
	"go.uber.org/zap"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/watchjournal/watchjournal/internal/clientrate"
	"github.com/watchjournal/watchjournal/journal"
	"github.com/watchjournal/watchjournal/journal/compactor"
	"github.com/watchjournal/watchjournal/journal/inspect"
	"github.com/watchjournal/watchjournal/reconcile"
	"github.com/watchjournal/watchjournal/shards"
)

// maxWait bounds a /wait long poll on the socket.
const maxWait = 30 * time.Second

// maxPageSize bounds --page-size, in objects per list page: a page is
// held in memory whole, and the apiserver may send fewer anyway.
const maxPageSize = 10000

type watchFlags struct {
	db, dir, kubeconfig, context, logLevel  string
	namespace, labelSelector, fieldSelector string
	allNamespaces, metadataOnly             bool
	secretPayloads                          bool
	// sealKeyFiles and sealResources are --seal-key-file and
	// --seal-resource (seal.go).
	sealKeyFiles, sealResources []string
	wire                        string
	compression                 bool
	pageSize                    int64
	// qps and burst are the client-side rate limit (--qps, --burst),
	// clientrate's defaults unless set.
	qps   float32
	burst int
	// verbosity is -v: logr V levels up to it are logged.
	verbosity int
	// verifyInterval, idleTimeout and requestTimeout are the
	// reconcile.Options of the same names; 0 means the library's default.
	verifyInterval, idleTimeout, requestTimeout time.Duration
	// retention is the --retain-* flags' retention, nil when none is set:
	// then watch keeps the retention the file records.
	retention *journal.Retention
	// metricsAddr is --metrics-addr: "" serves no metrics.
	metricsAddr string
	// shard is --shard-group and its companions: "" group runs unsharded
	// (shard.go).
	shard shardFlags
	// conf are the invocation's settings (settings.go): progress lines,
	// "still retrying" lines and discovery's backoff.
	conf *settings
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

func newWatchCmd(conf *settings) *cobra.Command {
	f := watchFlags{conf: conf}
	var rf retentionFlags
	cmd := &cobra.Command{
		Use:   "watch RESOURCE[,RESOURCE...] (--db FILE | --dir DIR) [-n NS | -A] [-l SELECTOR] [--field-selector S] [--retain-... LIMIT] [--verify-interval D]",
		Short: "Journal resources' changes into files until interrupted: one resource into FILE, or each into DIR/<resource>.db",
		Long: "Resolve RESOURCE (configmaps, cm, configmap, deployments.apps, configmaps.v1,\n" +
			"deployments.v1.apps, a CRD's plural) through discovery, then list and watch it into FILE\n" +
			"until SIGINT or SIGTERM. While the apiserver is unreachable or answers 5xx, discovery is\n" +
			"retried with backoff (200ms doubling to 30s). The namespace defaults to the kubeconfig\n" +
			"context's, else \"default\"; -A watches all namespaces; cluster-scoped resources ignore -n.\n" +
			"While it runs it serves reads on the unix socket FILE.sock (in $XDG_RUNTIME_DIR, or\n" +
			"$TMPDIR/watchjournal-UID, when FILE.sock is too long a path for a socket).\n\n" +
			"Several resources, comma-separated (configmaps,secrets), take --dir DIR: each is journaled\n" +
			"into a file of its own named after it (DIR/configmaps.v1.db, DIR/deployments.v1.apps.db),\n" +
			"with its own socket, all under one process; -n, -l and the other flags apply to each. The\n" +
			"read commands take one such file with --db.\n\n" +
			"The --retain-* flags bound the journal: they are recorded in FILE, replacing the retention\n" +
			"it recorded (a limit not given is none; --retain-events 0 alone removes every limit), and\n" +
			"enforced while the watch runs. Without them the watch enforces the retention FILE records.\n" +
			"Retention keeps the events a consumer has not committed, up to --retain-hard-bytes.\n\n" +
			"A Secret's data never reaches FILE without --secret-payloads: Secrets keep metadata only.\n" +
			"With --secret-payloads the data is stored sealed (AES-256-GCM) under the first key of\n" +
			"--seal-key-file, which it requires; --seal-resource seals other resources too. To rotate,\n" +
			"put the new key first and keep the old one until no record sealed under it is left.\n" +
			"--verify-interval (default 10m; 0: off) verifies that often while the watch is healthy\n" +
			"and journals what the watch lost, with origin relist (anti-entropy); journalctl relist\n" +
			"asks for one now.\n\n" +
			"Requests to the apiserver are not limited on the client by default (--qps -1): the\n" +
			"apiserver's API Priority and Fairness queues or refuses (429) what it cannot serve, as\n" +
			"controller-runtime relies on; --qps N --burst B limits them to N per second.\n\n" +
			"--shard-group NAME runs as one member of a shard group (one resource, --db FILE): each\n" +
			"member holds a coordination.k8s.io Lease and journals only the objects whose UID hashes into\n" +
			"its share; a key that moves between members is journaled DELETED and ADDED with reason\n" +
			"moved. stats shows whether the apiserver filters (shardSelector) or the watch does.",
		Args: resourceArg,
		RunE: func(cmd *cobra.Command, args []string) (err error) {
			if f.retention, err = rf.parse(cmd); err != nil {
				return err
			}
			if err := f.check(); err != nil {
				return err
			}
			return runWatch(cmd.Context(), cmd.ErrOrStderr(), args[0], f)
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&f.db, "db", "", "journal `FILE` of one resource")
	fl.StringVar(&f.dir, "dir", "", "directory `DIR` of one journal file per resource, named after it (configmaps.v1.db)")
	fl.StringVar(&f.kubeconfig, "kubeconfig", "", "kubeconfig `PATH` (default: $KUBECONFIG, else ~/.kube/config)")
	fl.StringVar(&f.context, "context", "", "kubeconfig context `NAME` (default: the current context)")
	fl.StringVarP(&f.namespace, "namespace", "n", "", "namespace `NS` to watch (default: the context's, else \"default\")")
	fl.BoolVarP(&f.allNamespaces, "all-namespaces", "A", false, "watch all namespaces")
	fl.StringVarP(&f.labelSelector, "selector", "l", "", "label `SELECTOR`, as kubectl's -l")
	fl.StringVar(&f.fieldSelector, "field-selector", "", "field `SELECTOR`, as kubectl's --field-selector")
	fl.Int64Var(&f.pageSize, "page-size", 500, "objects per list page, 1 to 10000")
	fl.BoolVar(&f.metadataOnly, "metadata-only", false, "keep only kind, apiVersion and metadata of each object (recorded in the file; always on for Secrets without --secret-payloads)")
	fl.StringVar(&f.wire, "wire", "auto", "encoding of watches: `auto` (protobuf for built-in kinds, stored as sent and decoded with this build's types, which drop fields they do not know; JSON for custom resources) or json (JSON on the wire and on disk, every field as served)")
	fl.BoolVar(&f.compression, "compression", false, "ask the apiserver to gzip its responses: fewer bytes over a slow or remote link, more CPU on both ends (off, as kube-controller-manager runs)")
	fl.BoolVar(&f.secretPayloads, "secret-payloads", false, "journal the data of Secrets, sealed under --seal-key-file (required with it); by default a Secret's data never reaches the journal: metadata only")
	addSealKeyFlag(cmd, &f.sealKeyFiles, sealKeyFileUsage+"; seals the objects of Secrets and of --seal-resource")
	fl.StringSliceVar(&f.sealResources, "seal-resource", nil, "also seal the objects of `RESOURCE[.GROUP]` (comma-separated or repeated; Secrets always are): a watch of one without --seal-key-file or --metadata-only is refused")
	fl.DurationVar(&f.verifyInterval, "verify-interval", reconcile.DefaultVerifyInterval, "verify against the server about every `DURATION` (a metadata-only list at the applied resourceVersion, jittered ±20%) and journal what the watch lost (anti-entropy); 0: off")
	fl.DurationVar(&f.idleTimeout, "idle-timeout", 0, "replace a watch that delivers nothing for `DURATION`, on a new connection (0: 2m)")
	fl.DurationVar(&f.requestTimeout, "request-timeout", 0, "wait at most `DURATION` for each request to begin its response; a page body is bounded by its progress, not in total (0: 60s)")
	fl.Float32Var(&f.qps, "qps", clientrate.QPS, "client-side limit in apiserver requests per `second`; negative: none, leaving flow control to the apiserver's API Priority and Fairness; 0: client-go's 5")
	fl.IntVar(&f.burst, "burst", clientrate.Burst, "client-side burst in `requests`, with a positive --qps")
	fl.StringVar(&f.metricsAddr, "metrics-addr", "", "serve Prometheus metrics on `HOST:PORT` at /metrics (off unless set; port 0 picks one, logged)")
	fl.StringVar(&f.logLevel, "log-level", "info", "log `LEVEL`: debug, info, warn or error")
	fl.IntVarP(&f.verbosity, "v", "v", 0, "log verbosity `N`, as kubectl's -v: 1 adds the library's debug lines (logr V(1): repeated failures), N adds client-go's klog lines up to V(N)")
	fl.Uint64Var(&rf.events, "retain-events", 0, "retain at most `N` events (0: no limit)")
	fl.StringVar(&rf.bytes, "retain-bytes", "", "retain at most `SIZE` of event payload: bytes, or a quantity like 64Mi or 1Gi")
	fl.Var(daysValue{&rf.age}, "retain-age", "trim events journaled longer ago than `DURATION`, e.g. 90m, 24h, 7d (unset: no age limit)")
	fl.StringVar(&rf.hardBytes, "retain-hard-bytes", "", "payload cap `SIZE` enforced even against consumers that have not committed")
	addShardFlags(fl, &f.shard)
	cmd.MarkFlagsMutuallyExclusive("namespace", "all-namespaces")
	cmd.MarkFlagsMutuallyExclusive("db", "dir")
	cmd.MarkFlagsOneRequired("db", "dir")
	return cmd
}

// check refuses flag values the library would not take as given: negative
// --verify-interval, --idle-timeout and --request-timeout (it would take
// them as 0); a -l or --field-selector that does not parse (labels.Parse,
// fields.ParseSelector, which bound a label key to the API's 63-character
// name and 253-character prefix), before the file records it: a file bound
// to a selector the loop refuses could only be deleted; a negative
// --burst, an unknown --wire and a --page-size out of range.
func (f watchFlags) check() error {
	for _, d := range []struct {
		flag string
		v    time.Duration
	}{{"verify-interval", f.verifyInterval}, {"idle-timeout", f.idleTimeout}, {"request-timeout", f.requestTimeout}} {
		if d.v < 0 {
			return fmt.Errorf("--%s %v: want a duration of 0 or more", d.flag, d.v)
		}
	}
	if _, err := labels.Parse(f.labelSelector); err != nil {
		return fmt.Errorf("-l %q: %v", clipText(f.labelSelector), clipText(err.Error()))
	}
	if _, err := fields.ParseSelector(f.fieldSelector); err != nil {
		return fmt.Errorf("--field-selector %q: %v", clipText(f.fieldSelector), clipText(err.Error()))
	}
	switch {
	case f.burst < 0:
		return fmt.Errorf("--burst %d: want 0 (client-go's default) or more requests", f.burst)
	case f.wire != "auto" && f.wire != string(reconcile.WireJSON):
		return fmt.Errorf("--wire %q: want auto or json", f.wire)
	case f.pageSize < 1 || f.pageSize > maxPageSize:
		return fmt.Errorf("--page-size %d: want 1 to %d objects per list page", f.pageSize, maxPageSize)
	}
	return nil
}

// clipText shortens s to at most 200 bytes for a message.
func clipText(s string) string {
	if len(s) <= 200 {
		return s
	}
	return fmt.Sprintf("%s…(%d bytes)", s[:200], len(s))
}

// watched is one journal file a watch writes: its resource, path, journal
// and loop (nil for a shard member), and what its socket asks (the loop,
// or the member's loops).
type watched struct {
	res  journal.Resource
	path string
	j    *journal.Journal
	loop *reconcile.Loop
	sock inspect.Loop
}

// runWatch journals the resources arg names (comma-separated) until ctx is
// done, serving reads on each file's socket meanwhile; it returns after
// the journals are closed. One resource goes to --db FILE or to
// --dir DIR/<resource>.db; several go to --dir DIR, one file each
// (reconcile.Group).
func runWatch(ctx context.Context, stderr io.Writer, arg string, f watchFlags) (err error) {
	var status *statusLine // a list's progress on a terminal (progress.go)
	if isTerminal(stderr) {
		status = &statusLine{w: stderr}
		stderr = status
	}
	log, err := newLogger(stderr, f.logLevel, f.verbosity)
	if err != nil {
		return err
	}
	// The library logs through logr, backed by the same zap core; so do
	// client-go's klog lines while the watch runs.
	lg := zapr.NewLogger(log)
	defer routeKlog(lg.WithName("client-go"), f.verbosity)()
	args, err := splitResources(arg)
	if err != nil {
		return err
	}
	keys, err := loadKeyring(f.sealKeyFiles)
	if err != nil {
		return err
	}
	sealed, err := parseSealResources(f.sealResources)
	if err != nil {
		return err
	}
	// jopts are the journals' options: the logger and sealing (seal.go).
	jopts := journal.Options{Logger: lg, Keyring: keys, SealResources: sealed}
	if len(args) > 1 && f.db != "" {
		return fmt.Errorf("watch %s: several resources take --dir DIR (one file each), not --db", arg)
	}
	if f.db != "" {
		if err := checkDBDir(f.db); err != nil {
			return err
		}
		if err := runningWatch(ctx, f.db); err != nil {
			return err
		}
	} else if err := checkDir(f.dir); err != nil {
		return err
	}
	cfg, kc, err := clientConfig(f)
	if err != nil {
		return err
	}
	cfg.WarningHandler = &warningLogger{log: log}
	var resources []journal.Resource
	for _, a := range args {
		res, err := f.resource(ctx, cfg, kc, a, log)
		if ctx.Err() != nil {
			log.Info("stopped before discovery succeeded")
			return nil
		}
		if err != nil {
			return err
		}
		for _, r := range resources {
			if r.GVR == res.GVR {
				return fmt.Errorf("watch %s: %s named twice", arg, res.GVR)
			}
		}
		resources = append(resources, res)
	}
	opts := reconcile.Options{
		PageSize: f.pageSize, SecretPayloads: f.secretPayloads, Compression: f.compression,
		Wire:           reconcile.Wire(f.wire),
		VerifyInterval: f.verifyInterval, IdleTimeout: f.idleTimeout, RequestTimeout: f.requestTimeout,
		Logger: lg,
	}
	if f.wire == "auto" {
		opts.Wire = reconcile.WireAuto // the zero value
	}
	if f.verifyInterval == 0 {
		opts.VerifyInterval = -1 // the flag's 0 (off) is the library's negative value
	}
	var files []watched
	var run func(context.Context) error
	var member *shards.Member // with --shard-group (shard.go)
	switch {
	case f.shard.group != "":
		if member, err = openShard(ctx, cfg, resources, opts, jopts, lg, f); err != nil {
			return err
		}
		defer func() { err = errors.Join(err, member.Close()) }() // the named result
		files, run = []watched{{res: resources[0], path: f.db, j: member.Journal(), sock: member.Loops()}}, member.Run
	case f.db != "":
		res := resources[0]
		o := jopts
		o.Resource = &res
		j, oerr := journal.Open(f.db, &o)
		if oerr != nil {
			return fileError{lockedBy(ctx, oerr, f.db)}
		}
		defer func() { err = errors.Join(err, j.Close()) }() // the named result
		loop, nerr := reconcile.New(cfg, j, opts)
		if nerr != nil {
			return nerr
		}
		files, run = []watched{{res: res, path: f.db, j: j, loop: loop, sock: loop}}, loop.Run
	default:
		paths := make([]string, len(resources))
		for i, res := range resources {
			paths[i] = filepath.Join(f.dir, reconcile.FileName(res.GVR))
			if err := runningWatch(ctx, paths[i]); err != nil {
				return err
			}
		}
		g, oerr := reconcile.OpenGroup(cfg, f.dir, resources, reconcile.GroupOptions{Loop: opts, Journal: jopts})
		if oerr != nil {
			return lockedBy(ctx, oerr, paths...)
		}
		defer func() { err = errors.Join(err, g.Close()) }() // the named result
		for _, m := range g.Files() {
			files = append(files, watched{res: m.Resource, path: m.Path, j: m.Journal, loop: m.Loop, sock: m.Loop})
		}
		run = g.Run
	}

	// Metrics: every file's, labeled by resource when there are several.
	stopMetrics, err := serveMetrics(f.metricsAddr, files, log)
	if err != nil {
		return err
	}
	defer stopMetrics()

	// Per file: its retention, its socket, and its compactor beside the
	// loops until ctx is done, stopped before the journals close. A
	// journal error stops them all.
	runCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	compacted := make(chan error, len(files))
	for _, w := range files {
		stop, serr := serveFile(runCtx, cancel, w.j, w.sock, w.path, f.retention, log, compacted)
		if serr != nil {
			return serr
		}
		defer stop() // before the journal closes: long polls end first
		if member != nil {
			log.Info("watching as a shard member", zap.Stringer("resource", w.res), zap.String("db", w.path),
				zap.String("group", f.shard.group), zap.String("member", member.Status().Member), zap.String("socket", inspect.SocketPath(w.path)))
			continue
		}
		log.Info("watching", zap.Stringer("resource", w.res), zap.String("db", w.path), zap.String("socket", inspect.SocketPath(w.path)))
	}
	// A list's progress: on a terminal one status line for a single
	// resource, log lines otherwise (progress.go).
	if len(files) > 1 {
		status = nil
	}
	var progressed sync.WaitGroup
	for _, w := range files {
		if w.loop == nil {
			continue // a shard member's loops report no progress
		}
		progressed.Go(func() { reportProgress(runCtx, w.loop, status, log, f.conf.progressEvery) }) // ends with runCtx
		progressed.Go(func() { reportRetrying(runCtx, w.loop, log, f.conf.stillRetryingEvery) })    // retrying.go; ends with runCtx
	}
	err = run(runCtx)
	cancel()
	progressed.Wait()
	for range files {
		err = errors.Join(err, <-compacted)
	}
	if err != nil {
		return err
	}
	for _, w := range files {
		log.Info("stopped", zap.String("db", w.path))
	}
	return nil
}

// serveFile records the retention r (nil: keeps the one j records), logs
// the one it enforces, and serves j's socket, path.sock, until stop is
// called (before j closes: long polls end first); it runs j's compactor
// until ctx is done, sending its result to compacted (nil at once when
// there is no retention to enforce) and calling cancel on a journal error.
func serveFile(ctx context.Context, cancel context.CancelFunc, j *journal.Journal, loop inspect.Loop, path string, r *journal.Retention, log *zap.Logger, compacted chan<- error) (stop func(), err error) {
	policy := journal.Retention{}
	if r != nil {
		if err := j.Settings().SetRetention(*r); err != nil {
			return nil, fmt.Errorf("record retention: %w", err)
		}
		policy = *r
	} else if policy, err = j.Settings().Retention(); err != nil {
		return nil, err
	}
	log.Info("retention", zap.String("retention", formatRetention(policy)))
	lg := zapr.NewLogger(log)
	h := inspect.Handler(j, loop, &inspect.Options{MaxWait: maxWait})
	if stop, err = inspect.Listen(inspect.SocketPath(path), h, lg); err != nil {
		return nil, err
	}
	if policy == (journal.Retention{}) {
		compacted <- nil
		return stop, nil
	}
	c := compactor.New(j, policy, compactor.Options{Logger: lg})
	go func() { // exits when ctx is done or on a journal error
		err := c.Run(ctx)
		if err != nil {
			err = fmt.Errorf("retention of %s: %w", path, err)
			cancel()
		}
		compacted <- err
	}()
	return stop, nil
}

// splitResources splits watch's RESOURCE argument at commas.
func splitResources(arg string) ([]string, error) {
	var out []string
	for _, a := range strings.Split(arg, ",") {
		if a = strings.TrimSpace(a); a == "" {
			return nil, fmt.Errorf("watch %q: an empty resource name; want RESOURCE[,RESOURCE...]", arg)
		}
		out = append(out, a)
	}
	return out, nil
}

// resource resolves one resource argument through discovery and returns
// the journal.Resource that f's flags give it.
func (f watchFlags) resource(ctx context.Context, cfg *rest.Config, kc clientcmd.ClientConfig, arg string, log *zap.Logger) (journal.Resource, error) {
	gvr, namespaced, err := resolve(ctx, cfg, arg, log, f.conf)
	if err != nil {
		return journal.Resource{}, err
	}
	res := journal.Resource{GVR: gvr, LabelSelector: f.labelSelector, FieldSelector: f.fieldSelector,
		MetadataOnly: f.metadataOnly || (gvr.Group == "" && gvr.Resource == "secrets" && !f.secretPayloads)}
	switch {
	case namespaced && !f.allNamespaces && f.namespace != "":
		res.Namespace = f.namespace
	case namespaced && !f.allNamespaces:
		if res.Namespace, _, err = kc.Namespace(); err != nil {
			return journal.Resource{}, err
		}
	case !namespaced && f.namespace != "":
		log.Info("ignoring -n: the resource is cluster-scoped", zap.String("gvr", gvr.String()))
	}
	return res, nil
}

// clientConfig returns the rest.Config of f's kubeconfig and context, with
// f's client-side rate limit (clientrate.Apply), and the kubeconfig it
// read, for its namespace.
func clientConfig(f watchFlags) (*rest.Config, clientcmd.ClientConfig, error) {
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	rules.ExplicitPath = f.kubeconfig
	kc := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, &clientcmd.ConfigOverrides{CurrentContext: f.context})
	cfg, err := kc.ClientConfig()
	if err != nil {
		return nil, nil, fmt.Errorf("kubeconfig: %w", err)
	}
	clientrate.Apply(cfg, f.qps, f.burst)
	return cfg, kc, nil
}

// warningLogger logs the apiserver's warnings (a deprecated API, say)
// through log, once each: client-go would print them through klog.
type warningLogger struct {
	log  *zap.Logger
	seen sync.Map // the warnings logged
}

func (w *warningLogger) HandleWarningHeader(code int, _, text string) {
	if code != 299 || text == "" {
		return
	}
	if _, seen := w.seen.LoadOrStore(text, true); !seen {
		w.log.Warn("apiserver warning", zap.String("warning", text))
	}
}

// checkDBDir returns a file error (exit status 2) when the directory of
// db is missing or not a directory: watch finds out before discovery,
// which may wait for the apiserver.
func checkDBDir(db string) error {
	dir := filepath.Dir(db)
	fi, err := os.Stat(dir)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return fileError{fmt.Errorf("--db %s: directory %s does not exist", db, dir)}
	case err != nil:
		return fileError{fmt.Errorf("--db %s: %w", db, err)}
	case !fi.IsDir():
		return fileError{fmt.Errorf("--db %s: %s is not a directory", db, dir)}
	}
	return nil
}

// checkDir returns a file error (exit status 2) when --dir is missing or
// not a directory: watch finds out before discovery.
func checkDir(dir string) error {
	fi, err := os.Stat(dir)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return fileError{fmt.Errorf("--dir %s: directory does not exist", dir)}
	case err != nil:
		return fileError{fmt.Errorf("--dir %s: %w", dir, err)}
	case !fi.IsDir():
		return fileError{fmt.Errorf("--dir %s: not a directory", dir)}
	}
	return nil
}

// errWatchRunning is returned by watch when another watch already writes
// the file and answers on its socket: exit status 2.
var errWatchRunning = errors.New("another journalctl watch is already writing")

// lockedBy returns runningWatch's error for the first of dbs that a watch
// serves when err, the error of opening them, matches journal.ErrLocked;
// else err.
func lockedBy(ctx context.Context, err error, dbs ...string) error {
	if !errors.Is(err, journal.ErrLocked) {
		return err
	}
	for _, db := range dbs {
		if werr := runningWatch(ctx, db); werr != nil {
			return werr
		}
	}
	return err
}

// runningWatch returns an error matching errWatchRunning when a watch
// answers on db's socket, naming its pid when /status gives it, else nil.
func runningWatch(ctx context.Context, db string) error {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	s := inspect.NewClient(inspect.SocketPath(db))
	defer s.Close()
	st, err := s.Status(ctx)
	switch {
	case err != nil:
		return nil
	case st.PID > 0:
		return fmt.Errorf("%w %s (pid %d); stop it first", errWatchRunning, db, st.PID)
	}
	return fmt.Errorf("%w %s (its socket %s answers); stop it first", errWatchRunning, db, s.Socket())
}
