// Package jcache is a controller-runtime cache.Cache whose objects live in
// journal files on disk, not in memory: an existing operator changes one
// line and keeps every builder call (For, Owns, Watches,
// mgr.GetClient().Get/List, mgr.GetFieldIndexer().IndexField) as it is.
//
//	mgr, err := ctrl.NewManager(cfg, ctrl.Options{
//		NewCache: jcache.NewFunc(jcache.Options{Dir: "/var/lib/my-operator"}),
//	})
//
// # How
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
//   - Get and List read the file (indexer.go): one bbolt read transaction,
//     objects decoded fresh on each call, transformed (DefaultTransform,
//     ByObject.Transform), nothing kept on the heap between calls.
//   - Handlers (AddEventHandler, AddEventHandlerWithOptions) first get
//     OnAdd for every stored object, read from disk before the server is
//     reached, then the journal's events: OnUpdate with the complete old
//     object (the key's previous event in the file), OnDelete with the
//     last object, DeletedFinalStateUnknown for deletes a relist inferred
//     (handler.go). RemoveEventHandler stops a handler.
//   - HasSynced is the loop's: true once the file is current with the
//     server (a complete list, or a resume the server proved).
//   - IndexField: the index is kept in the journal file, written in the
//     same transaction as the object (journal.AddIndexes), so that
//     client.MatchingFields decodes only the objects it returns
//     (diskindex.go: when it is built, and what a failing function does).
//   - RemoveInformer stops the informer; the last informer of a file stops
//     its loop and closes the file (the file stays, for the next start).
//
// # Restart-exact delivery: Exact
//
// A controller built with For, Owns and Watches on this cache reconciles
// every object after a restart, as with controller-runtime's cache: its
// handlers get OnAdd for every stored object. Exact gives the builder's
// sources a durable position in the cache's files instead (exact.go):
//
//	ex := jcache.Exact(mgr.GetCache(), "mirror")
//	err := ctrl.NewControllerManagedBy(mgr).Named("mirror").
//		WatchesRawSource(ex.Kind(&v1.Foo{}, &handler.EnqueueRequestForObject{}, preds...)).
//		WatchesRawSource(ex.Kind(&corev1.Secret{}, handler.EnqueueRequestForOwner(mgr.GetScheme(), mgr.GetRESTMapper(), &v1.Foo{}, handler.OnlyControllerOwner()))).
//		Complete(ex.Reconciler(r))
//
// Each Kind source reads its object's journal file (the informer's: one
// watch) with a journal consumer named after the controller and the
// kind, and commits only past events whose requests reconciled; a
// restart delivers only what is past the commit (changes and deletes,
// those a relist inferred too), and the timers of RequeueAfter that are
// due. The builder's WithEventFilter does not apply to raw sources
// (controller-runtime's rule): give the predicates to Kind. Each source's
// consumer holds its file's retention back, as any journal consumer does,
// up to Retention.HardMaxBytes; a consumer trimmed past gets a create
// event for every object again, with a log line.
//
// # Leader election and a warm standby
//
// The cache runs on every replica (it needs no leader election), so each
// replica's journal files are current; the controller, and so its Exact
// sources, runs on the leader only. With ExactOptions.Standby the leader
// publishes how far each source has reconciled, as a resourceVersion, on
// a Lease of its own (annotation AnnotationExactPositions, at most every
// Standby.Interval and once more on a graceful stop), and a new leader's
// sources start from their own journals after the last event those
// positions cover: a failover reconciles what changed since the old
// leader's last publish, not every object (standby.go):
//
//	ex := jcache.ExactWith(mgr.GetCache(), "mirror", jcache.ExactOptions{
//		Standby: &jcache.Standby{Namespace: "mirror-system", Name: "mirror-position"}})
//	if err := ex.AddToManager(mgr); err != nil { // publisher (leader), follower (every replica)
//		return err
//	}
//	err := ctrl.NewControllerManagedBy(mgr).Named("mirror").
//		WatchesRawSource(ex.Kind(&v1.Foo{}, &handler.EnqueueRequestForObject{})).
//		Complete(ex.Reconciler(r))
//
// Each replica needs its own cache Dir (a volume per pod) and the RBAC
// get, create, update on leases.coordination.k8s.io in Standby.Namespace.
// After a crash (no final publish) the next leader also reconciles what
// was committed in the last Interval. A position it cannot place (none
// published, older than its journal's retention) starts from the
// replica's own consumer when it has one, else replays every object as a
// first start; so does a quiet resource whose position has not reached
// the standby's own list yet (conservative: more, never less).
//
// # Options that mean something else on disk
//
//   - UnsafeDisableDeepCopy (default, per namespace, ByObject, per call)
//     is accepted and always in effect: every read decodes fresh objects
//     from the file, which are the caller's own, so jcache turns
//     controller-runtime's deep copy off for all of them; changing a
//     returned object never changes the cache, and two reads never share
//     memory.
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
//   - Secrets: a typed or unstructured informer of Secrets is refused
//     unless Options.SecretPayloads opts in and the cache has a key
//     (Options.KeyFiles, e.g. a mounted Secret of 32 random bytes or their
//     base64; or Options.Keyring): then every Secret's object is stored
//     sealed, encrypted with AES-256-GCM (journal/seal.go), in the files,
//     their objects buckets and a relist's stage file alike, and opened
//     on each read. Options.SealResources seals other resources too.
//     Rotation: the new key first, the old one after it, until
//     journal.Journal.SealKeyUse (journalctl check) no longer reports the
//     old key. As PartialObjectMetadata, Secrets keep metadata only and
//     need no key.
//
// # Files
//
// Options.Dir holds one file per resource and scope (fileName in
// feed.go). New uses DefaultDir, else $WATCHJOURNAL_CACHE_DIR, else a
// temporary directory per cache, removed when Start returns. A scope no
// longer asked for (a changed selector) leaves its file behind.
//
// # Retention: bounded disk
//
// Each file's events are trimmed (package compactor) under
// Options.Retention, by default DefaultRetention: 64 MiB of encoded events
// beyond what the handlers have been given; a zero journal.Retention turns
// trimming off. A file then holds about those events plus the latest
// object of every live key (~1.3–2× their JSON, bbolt's pages included). A
// stuck handler holds the file's growth unless Retention.HardMaxBytes caps
// it (retention.go; what a handler gets after a trim: handler.go). Freed
// pages are reused; the file does not shrink (journalctl compact, offline).
// journalctl stats --db DIR shows each file of a cache directory through
// its inspect socket, FILE.sock, while the cache runs (Options.NoSocket).
// A DELETED a relist inferred (the object was deleted while the process
// was down, or during a 410 gap) is stored with the key's last object,
// read in the same transaction, so its DeletedFinalStateUnknown holds the
// complete last object even when retention trimmed the key's records
// (see "Retention" in handler.go).
//
// # Metrics and probes
//
// RegisterMetrics(ctrlmetrics.Registry, mgr.GetCache()) serves package
// metrics' watchjournal_* series of every file the cache has open, each
// labeled resource, found at each scrape (metrics.go). HealthzCheck and
// ReadyzCheck are the manager's probes of the files of given kinds,
// WaitFor is read-your-writes (health.go). examples/cacheoperator has the
// whole production setup.
package jcache
