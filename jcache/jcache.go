package jcache

// The cache: controller-runtime's own, with journal files for informers.
//
// controller-runtime's own cache (its options, DefaultNamespaces and
// per-namespace configs, ByObject, selectors, ReaderFailOnMissingInformer,
// its Reader and IndexField) is kept as it is; jcache replaces the one
// thing underneath, the informer (cache.Options.NewInformer). Each
// informer is a journal file (package journal, objects kept:
// journal.KeepObjects) written by a reconcile.Loop (list, watch, relist
// by diff against the file, resume after a restart), one per resource and
// scope: GVR, namespace, label and field selectors, metadata-only. Which
// scope an informer has is read from the list request controller-runtime
// built for it (probe.go). Typed and unstructured informers of one scope
// share one file (feed.go).
//
// What that makes of the cache's calls is in doc.go ("Guarantees"), with
// these details: a Get or List is one bbolt read transaction, its objects
// stored transformed (DefaultTransform, ByObject.Transform, applied before
// the disk: transform.go); OnUpdate's old
// object is the key's previous event in the file; RemoveEventHandler
// stops a handler; HasSynced is the loop's (a complete list, or a resume
// the server proved); RemoveInformer stops the informer, and the last
// informer of a file stops its loop and closes the file, which stays for
// the next start (feed.go).
//
// Options that mean something else on disk:
//
//   - UnsafeDisableDeepCopy (default, per namespace, ByObject, per call)
//     is accepted and always in effect: every read returns objects of the
//     caller's own (decoded from the file, or a deep copy: recent.go), so
//     jcache turns controller-runtime's deep copy off for all of them;
//     changing a returned object never changes the cache, and two reads
//     never share memory.
//   - DefaultWatchErrorHandler gets each new error of the loop
//     (reconcile.Status.LastError) with a zero *Reflector: there is none.
//   - HTTPClient is used by controller-runtime's discovery (the
//     RESTMapper); each journal's loop builds its own transport from the
//     rest.Config (package reconcile says how and why).
//   - EnableWatchBookmarks: true (the default) is what the loop does
//     anyway; false, anywhere in the options, is refused (ErrNoBookmarks):
//     the loop always asks for bookmarks.
//   - SyncPeriod resyncs handlers from disk (OnUpdate(obj, obj) for every
//     stored object each period).
//   - NewInformer is refused (ErrNewInformer): the informers are the
//     journal files.
//   - Secrets: a typed or unstructured informer of Secrets needs no
//     option: its objects are stored sealed and opened on each read, its
//     index values stored as keyed hashes, under the key of KeyFiles or
//     Keyring, else under a key made for the process, which a restart
//     replaces (the file is then listed afresh: seal.go). KeyFiles and
//     SealResources say how to keep files across restarts and how to
//     rotate the key (journalctl check until journal.Settings.SealKeyUse
//     no longer reports the old key).

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"sync"
	"time"

	"github.com/go-logr/logr"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	toolscache "k8s.io/client-go/tools/cache"
	crcache "sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	crlog "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/watchjournal/watchjournal/journal"
	"github.com/watchjournal/watchjournal/reconcile"
)

// Options configure a cache beyond controller-runtime's cache.Options.
type Options struct {
	// Dir is the directory of the cache's journal files, one per resource
	// and scope (namespace, selectors, metadata-only), created (0700) when
	// missing. Files survive a restart: the next process replays them to
	// its handlers before the server answers, and resumes from their
	// resourceVersions. Empty: a fresh temporary directory per cache,
	// removed when the cache's Start returns (nothing survives a restart).
	// One process uses a directory at a time: a file has one writer (a
	// second process's informer fails with journal.ErrLocked); within a
	// process, caches on one directory share each file.
	Dir string
	// SecretPayloads is accepted and has no effect: the data of Secrets
	// is always kept, sealed (seal.go). Typed and unstructured Secret
	// informers need no option: without Keyring or KeyFiles their objects
	// are sealed with AES-256-GCM (journal/seal.go) under a key made for
	// the process (32 bytes of crypto/rand, never written down), and a
	// restart, which makes a new key, lists their files afresh; with a
	// key their files survive restarts. metav1.PartialObjectMetadata
	// Secrets keep only metadata and seal nothing.
	//
	// Deprecated: Secrets' data is always kept sealed; set KeyFiles (or
	// Keyring) for files that survive restarts.
	SecretPayloads bool
	// Keyring seals and opens the objects of sensitive resources (Secrets
	// and SealResources) in the cache's files (journal.Options.Keyring):
	// its first key seals, every key opens; index values of those files
	// are stored as HMAC-SHA256 hashes under a key derived from the first.
	// Nil: the keys of KeyFiles, if any, else a key made for the process
	// (SecretPayloads says what that costs at a restart).
	Keyring *journal.Keyring
	// KeyFiles are read with journal.LoadKeyring when the cache is built
	// (New fails on a missing or malformed file), when Keyring is nil:
	// each file is 32 raw bytes, or one base64 key a line, the primary
	// first, as a mounted Kubernetes Secret holds them (e.g. a Secret
	// with a key "keys" mounted at /etc/my-operator/seal, KeyFiles:
	// []string{"/etc/my-operator/seal/keys"}; make a key with
	// `head -c 32 /dev/urandom | base64`). The files' first key is the
	// primary. Rotation (journal/seal.go): put the new key first, keep
	// the old one after it and restart; once retention has trimmed every
	// record sealed before (journal.Settings.SealKeyUse reports no use of
	// the old key; journalctl check shows the sealed row), remove the
	// old key; the restart with a new primary also rebuilds the files'
	// indexes, whose values are hashed under it. A file is read once,
	// when the cache is built: a changed mounted Secret takes effect at
	// the next restart. A file sealed under the process's key is listed
	// afresh when KeyFiles is first given, as at any restart without them.
	KeyFiles []string
	// SealResources are resources sealed besides Secrets
	// (journal.Options.SealResources, which extend
	// journal.DefaultSealResources), under the same key as Secrets,
	// unless metadata-only. A file records that it seals: a restart
	// without its resource here fails its informer with a
	// *journal.SealingError rather than write plaintext into it (remove
	// the file to accept that).
	SealResources []schema.GroupResource
	// TransformID names the transforms of cache.Options (DefaultTransform,
	// ByObject[...].Transform), which run before objects are stored: each
	// file records it, and a start whose transform is another (another
	// TransformID, a transform where there was none, or none where there
	// was one) starts the file afresh, listing its objects again under the
	// new transform (transform.go). Change it whenever a transform changes
	// what it keeps or drops: the functions themselves cannot be compared
	// across restarts. Empty is a name like any other.
	TransformID string
	// NoSync skips fsync on each commit (journal.Options.NoSync): for
	// tests and benchmarks only.
	NoSync bool
	// Loop configures each resource's reconcile.Loop; its SecretPayloads
	// is set (the cache always seals), its Transform by the informers'
	// transforms (transform.go), and a zero Logger by Logger.
	Loop reconcile.Options
	// Retention bounds each journal file's events (package compactor):
	// nil means DefaultRetention (64 MiB of encoded events); a zero
	// journal.Retention turns trimming off (files grow with their events).
	// Trimming never removes an event a handler has not been given, nor
	// the old object its OnUpdate needs (retention.go), except above
	// HardMaxBytes, when set: then a handler that fell behind stops.
	Retention *journal.Retention
	// NoSocket turns off the inspect socket each open file is served on
	// (journal/inspect: FILE.sock, mode 0600, beside the file, or in the
	// user's runtime directory when that path is too long for a socket:
	// inspect.SocketPath), through
	// which journalctl stats, events, index and consumers read a file
	// while the cache holds it (a read-only open waits for the writer's
	// lock).
	NoSocket bool
	// Shard, when set, makes the cache one member of a shard group: its
	// handlers (For, Owns, Watches) get the objects of Shard.Resources only
	// in this replica's hash range, hashed by their controller owner's
	// UID, else their own; reads and the other resources stay whole
	// (shard.go). Nil: not sharded.
	Shard *ShardOptions
	// Logger receives the cache's errors (a handler's feed that stopped, a
	// read that failed where the Store interface has no error to return).
	// Zero: controller-runtime's log.Log, named "jcache".
	Logger logr.Logger

	hooks testHooks // tests only (testhooks.go)
}

// EnvDir names the environment variable New reads for the journal
// directory (Options.Dir) when DefaultDir is empty.
const EnvDir = "WATCHJOURNAL_CACHE_DIR"

// DefaultDir is the journal directory of caches built by New; empty means
// the environment variable EnvDir, and when that is empty too, a temporary
// directory per cache (see Options.Dir).
var DefaultDir string

// New is controller-runtime's cache.New with objects on disk: the
// signature of cache.NewCacheFunc, with Options{Dir: DefaultDir or
// $WATCHJOURNAL_CACHE_DIR}. Use NewFunc to choose the options.
func New(cfg *rest.Config, opts crcache.Options) (crcache.Cache, error) {
	return newCache(cfg, opts, Options{Dir: cmp.Or(DefaultDir, os.Getenv(EnvDir))})
}

// NewFunc returns a cache.NewCacheFunc for ctrl.Options{NewCache: ...}:
//
//	mgr, err := ctrl.NewManager(cfg, ctrl.Options{
//		NewCache: jcache.NewFunc(jcache.Options{Dir: "/var/lib/my-operator"}),
//	})
func NewFunc(o Options) crcache.NewCacheFunc {
	return func(cfg *rest.Config, opts crcache.Options) (crcache.Cache, error) {
		return newCache(cfg, opts, o)
	}
}

// Cache is the cache New and NewFunc return: controller-runtime's
// cache.Cache whose informers keep their objects in journal files.
type Cache struct {
	crcache.Cache
	dir       string
	temporary bool
	log       logr.Logger    // Options.Logger (Exact's sources log with it)
	built     builtInformers // for RemoveInformer (unstarted.go)
	shard     *shardGroup    // nil unless Options.Shard (shardgroup.go)
	shardRes  *ShardOptions
	plans     readPlans // planned Lists in flight (readplan.go)
}

// Dir returns the directory of the cache's journal files.
func (c *Cache) Dir() string { return c.dir }

// Start runs the cache until ctx is done (controller-runtime's
// Cache.Start); a temporary directory (Options.Dir empty) is removed when
// it returns.
//
// A sharded cache (Options.Shard) also holds its Lease in the group while
// it runs, and deletes it when ctx is done, before Start returns.
func (c *Cache) Start(ctx context.Context) error {
	var group sync.WaitGroup
	gctx, stop := context.WithCancel(ctx) // ends with the cache, on an error too
	if c.shard != nil {
		group.Go(func() { c.shard.run(gctx) })
	}
	err := c.Cache.Start(ctx)
	stop()
	group.Wait()
	if c.temporary {
		_ = os.RemoveAll(c.dir)
	}
	return err
}

// NeedLeaderElection returns false: every replica keeps its cache, as
// controller-runtime's cache does (manager.LeaderElectionRunnable).
func (c *Cache) NeedLeaderElection() bool { return false }

// ErrNoBookmarks: EnableWatchBookmarks was set to false somewhere in
// cache.Options; each journal's loop always asks for bookmarks (package
// reconcile relies on them to keep a quiet watch's resourceVersion fresh).
var ErrNoBookmarks = errors.New("jcache: EnableWatchBookmarks=false cannot be honoured: the journal's loop always asks for watch bookmarks")

// checkBookmarks refuses EnableWatchBookmarks=false in any of opts'
// places.
func checkBookmarks(opts crcache.Options) error {
	off := func(b *bool) bool { return b != nil && !*b }
	if off(opts.DefaultEnableWatchBookmarks) {
		return fmt.Errorf("%w (DefaultEnableWatchBookmarks)", ErrNoBookmarks)
	}
	for ns, c := range opts.DefaultNamespaces {
		if off(c.EnableWatchBookmarks) {
			return fmt.Errorf("%w (DefaultNamespaces[%q])", ErrNoBookmarks, ns)
		}
	}
	for obj, bo := range opts.ByObject {
		if off(bo.EnableWatchBookmarks) {
			return fmt.Errorf("%w (ByObject[%T])", ErrNoBookmarks, obj)
		}
		for ns, c := range bo.Namespaces {
			if off(c.EnableWatchBookmarks) {
				return fmt.Errorf("%w (ByObject[%T].Namespaces[%q])", ErrNoBookmarks, obj, ns)
			}
		}
	}
	return nil
}

// noDeepCopy returns a copy of m with UnsafeDisableDeepCopy set to v in
// every Config (nil for nil).
func noDeepCopy(m map[string]crcache.Config, v *bool) map[string]crcache.Config {
	if m == nil {
		return nil
	}
	out := make(map[string]crcache.Config, len(m))
	for ns, c := range m {
		c.UnsafeDisableDeepCopy = v
		out[ns] = c
	}
	return out
}

// ErrNewInformer: cache.Options.NewInformer was set; the journal cache
// builds the informers itself.
var ErrNewInformer = errors.New("jcache: cache.Options.NewInformer cannot be set: the cache's informers are journal files")

func newCache(cfg *rest.Config, opts crcache.Options, o Options) (crcache.Cache, error) {
	if opts.NewInformer != nil {
		return nil, ErrNewInformer
	}
	if err := checkBookmarks(opts); err != nil {
		return nil, err
	}
	if o.Logger.GetSink() == nil {
		o.Logger = crlog.Log.WithName("jcache")
	}
	if o.Keyring == nil && len(o.KeyFiles) > 0 {
		k, err := journal.LoadKeyring(o.KeyFiles...)
		if err != nil {
			return nil, fmt.Errorf("jcache: Options.KeyFiles: %w", err)
		}
		o.Keyring = k
	}
	if o.Keyring == nil {
		k, err := o.processKeys().keyring() // seal.go
		if err != nil {
			return nil, err
		}
		o.Keyring = k
	}
	o.SealResources = append([]schema.GroupResource(nil), o.SealResources...)
	if opts.Scheme == nil {
		opts.Scheme = scheme.Scheme // as controller-runtime defaults it
	}
	c := &Cache{dir: o.Dir, log: o.Logger, built: builtInformers{scheme: opts.Scheme}}
	if o.Shard != nil {
		so, err := o.Shard.withDefaults()
		if err != nil {
			return nil, err
		}
		if c.shard, err = newShardGroup(cfg, so, o.Logger, o.hooks); err != nil {
			return nil, err
		}
		c.shardRes = &so
	}
	if c.dir == "" {
		d, err := os.MkdirTemp("", "jcache-")
		if err != nil {
			return nil, fmt.Errorf("jcache: %w", err)
		}
		c.dir, c.temporary = d, true
	} else if err := os.MkdirAll(c.dir, 0o700); err != nil {
		return nil, fmt.Errorf("jcache: %w", err)
	}
	base := opts.HTTPClient
	if base == nil {
		var err error
		if base, err = rest.HTTPClientFor(cfg); err != nil {
			return nil, fmt.Errorf("jcache: %w", err)
		}
	}
	rt := base.Transport
	if rt == nil {
		rt = http.DefaultTransport
	}
	if cfg == nil {
		return nil, errors.New("jcache: no rest.Config")
	}
	// The path of the host, which client-go puts before each request's.
	host, _, err := rest.DefaultServerUrlFor(cfg)
	if err != nil {
		return nil, fmt.Errorf("jcache: %w", err)
	}
	probe := &probeTransport{next: rt, prefix: host.Path, seen: map[string]*url.URL{}}
	hc := *base
	hc.Transport = probe
	opts.HTTPClient = &hc
	// Every read returns objects of the caller's own (decoded from the
	// file, or a deep copy: recent.go): controller-runtime's reader need
	// not copy them again.
	// (The caller's maps are copied, not changed.)
	noCopy := true
	opts.DefaultUnsafeDisableDeepCopy = &noCopy
	opts.DefaultNamespaces = noDeepCopy(opts.DefaultNamespaces, &noCopy)
	if opts.ByObject != nil {
		byObject := make(map[client.Object]crcache.ByObject, len(opts.ByObject))
		for obj, bo := range opts.ByObject {
			bo.UnsafeDisableDeepCopy = &noCopy
			bo.Namespaces = noDeepCopy(bo.Namespaces, &noCopy)
			byObject[obj] = bo
		}
		opts.ByObject = byObject
	}
	dir := c.dir
	opts.NewInformer = func(lw toolscache.ListerWatcher, objType runtime.Object, resync time.Duration, indexers toolscache.Indexers) toolscache.SharedIndexInformer {
		res, err := probe.resource(lw)
		var f *feed
		gvk := objType.GetObjectKind().GroupVersionKind()
		if err == nil {
			_, res.MetadataOnly = objType.(*metav1.PartialObjectMetadata)
			var g *shardGroup // the file journals only the range (feedrange.go)
			if c.shardRes.ranged(res.GVR.GroupResource()) {
				g = c.shard
			}
			f, err = acquire(cfg, dir, res, &o, g)
		}
		inf := newInformer(f, err, objType, gvk, resync, indexers, o.Logger)
		inf.plans = &c.plans
		if err == nil && c.shardRes.sharded(res.GVR.GroupResource()) {
			inf.shard = c.shard
		}
		c.built.add(objType, inf)
		return inf
	}
	inner, err := crcache.New(cfg, opts)
	if err != nil {
		if c.temporary {
			_ = os.RemoveAll(c.dir)
		}
		return nil, err
	}
	c.Cache = inner
	return c, nil
}
