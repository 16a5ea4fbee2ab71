// Package jcache is a controller-runtime cache.Cache whose objects live in
// journal files on disk, not in memory: an existing operator changes one
// line and keeps every builder call (For, Owns, Watches,
// mgr.GetClient().Get/List, mgr.GetFieldIndexer().IndexField) as it is.
//
//	mgr, err := ctrl.NewManager(cfg, ctrl.Options{
//		NewCache: jcache.NewFunc(jcache.Options{Dir: "/var/lib/my-operator"}),
//	})
//
// controller-runtime's cache is kept; only its informers are replaced, each
// a journal file written by a reconcile.Loop, one per resource and scope
// (jcache.go, with the options that mean something else on disk).
//
// # Guarantees
//
//   - Get and List read the file on each call and return objects of the
//     caller's own: decoded afresh, or, for a Get of an object stored as
//     JSON that a handler was just given from the same bytes, a deep
//     copy of it (at most 512 such objects and 2 MiB of their bytes per
//     informer: recent.go); no two reads share memory (indexer.go). A
//     List with a label selector or Limit decodes only the objects it
//     returns (readplan.go). IndexField's indexes are kept in the file,
//     written with the object, and reindexed at every start with the
//     function given now (a changed function is followed, only what
//     differs is rewritten); until the reindex is done a read
//     through an index decodes the namespace's objects, so it is never
//     stale (diskindex.go).
//   - Handlers get OnAdd for every stored object, read from disk before the
//     server is reached, then the journal's events: OnUpdate with the
//     complete old object, OnDelete with the last object,
//     DeletedFinalStateUnknown for deletes a relist inferred (handler.go).
//     A handler added after a restart first gets, at least once, a
//     DeletedFinalStateUnknown for each object deleted since the file's
//     handlers were last current (catchup.go).
//   - A watch event reaches the handlers, and Get, List and index
//     lookups, once its batch is planned, before the commit's fsync
//     (and while the batch before it commits): the batches in flight are
//     held in memory and laid over the file until their commits return
//     (tail.go). A crash
//     before the commit loses only events the server sends again.
//   - HasSynced is true once the file is current with the server.
//   - The file's pages that replays, lists and reads make resident in the
//     process are given back after each (pages.go): RSS stays near the
//     process's own memory, not the file's size (the pages stay in the
//     page cache).
//   - Exact gives the builder's sources a durable position: a restart
//     reconciles what changed, not every object (exact.go); with
//     ExactOptions.Standby a new leader starts where the old one's
//     published position left off (standby.go).
//   - Disk is bounded: each file's events are trimmed under
//     Options.Retention (DefaultRetention, 64 MiB beyond what the handlers
//     have been given), never past what a handler has not been given
//     unless Retention.HardMaxBytes is set (retention.go).
//   - cache.Options.DefaultTransform and ByObject's Transform run before
//     an object is stored: what they drop never reaches a file; a file
//     written under another transform (Options.TransformID) is started
//     afresh (transform.go).
//   - Secrets need no option: typed and unstructured Secrets are stored
//     sealed, their index values hashed, under Options.KeyFiles' key or
//     else a key made for the process, which a restart replaces by
//     listing the file afresh (seal.go).
//   - A sharded cache (Options.Shard) gives its handlers the objects of
//     the sharded resources only in its range of the shard group, an owned
//     object in its controller owner's; a key that moves away gets no
//     event, one that moves in an OnAdd (shard.go). The files of
//     ShardOptions.Owners journal, and their reads return, only the range
//     (feedrange.go). A range taken over from another member (dead, or
//     one that let it go, or this member's previous instance) comes with
//     a DeletedFinalStateUnknown for each object of a whole file deleted
//     since the position that member published with it
//     (shardtakeover.go).
//
// # Where to read more
//
// Files and the directory: feed.go. Which resource an informer asks for:
// probe.go. Metrics: RegisterMetrics (metrics.go). Probes and
// read-your-writes: HealthzCheck, ReadyzCheck, WaitFor (health.go).
// examples/cacheoperator has the whole production setup.
package jcache
