// Package crsource feeds a controller-runtime controller from a watchjournal
// journal: a source.TypedSyncingSource[reconcile.Request] (the interface
// source.Kind implements) whose durable position advances only past events
// whose requests were all reconciled successfully.
//
// The name: controller-runtime calls this kind of thing a source (package
// sigs.k8s.io/controller-runtime/pkg/source), and operator code imports
// that package as source; crsource ("controller-runtime source") sits beside
// it without an import alias. The package owns the journal's writer (a
// watchjournal reconcile.Loop, run by Start), so operator code imports
// controller-runtime's reconcile package and never ours: no alias for the
// two packages named reconcile either.
//
// # Use
//
//	src, err := crsource.New(cfg, crsource.Options{Path: "cm.db", Resource: res})
//	err = ctrl.NewControllerManagedBy(mgr).Named("mirror").
//		WatchesRawSource(src).
//		Complete(src.Reconciler(&MyReconciler{}))
//
// Runnable examples: ExampleNew (a manager and a controller) and
// ExampleNewFromConsumer (what the source does with a controller's queue,
// with output) in example_test.go; a whole operator in examples/operator.
//
// # Delivery
//
// Every journal event becomes a reconcile.Request for its key (namespace and
// name), added to the controller's queue: ADDED, MODIFIED, DELETED seen live
// and DELETED inferred by a relist (objects deleted while the process was
// down) alike. The queue merges requests for one key, as for source.Kind.
//
// # Reasons
//
// A request carries no event type, so the reconciler learns what happened
// by reading the object, as with source.Kind. What a DELETED's
// journal.Reason changes:
//
//   - gone, unconfirmed, or none: queued. The object is deleted (or may be):
//     the reconciler's Get answers NotFound.
//   - left-selector: queued, as source.Kind's informer queues the DELETED it
//     gets when an object leaves its label selector: the controller must
//     reconcile to notice the object left its scope. It is not a deletion:
//     the object still exists on the server, out of the selector. A
//     reconciler that reads through the journal (journal/cache) gets
//     NotFound; one that reads the server gets the object with its new
//     labels. For a controller whose scope is its selector, NotFound
//     means out of scope, and cleaning up what it made for the object is
//     right for gone and left-selector alike; one whose scope is the
//     object whatever its labels asks the server (the manager's
//     APIReader): NotFound there is a deletion, found is left-selector.
//     Cleanup that must precede the object's removal runs on
//     deletionTimestamp (finalizers), which an object leaving a selector
//     never has (README, "A delete is not always a deletion").
//   - moved (package shards): not queued. The key moved to another
//     replica's range; that replica journals ADDED with reason moved and
//     reconciles it. Reconciling here too would race the new owner, and
//     the object was not deleted. The consumer's position moves past it.
//     An ADDED with reason moved is queued like any ADDED: this replica
//     owns the key now.
//
// The consumer's committed offset (journal.Consumer, named
// Options.Consumer) moves past an event only once a reconcile of its key
// that started after the event was queued completed: a nil error without
// Requeue, with or without RequeueAfter (see "Requeue timers"). An error
// or Requeue: true holds the commit back until a later reconcile of that
// key completes (controller-runtime retries both, rate-limited: the
// reconciler said it is not done); a reconcile.TerminalError counts as
// done (controller-runtime does not retry it either). The wrapper returned by Reconciler records these outcomes,
// and it is required: a reconciler not wrapped (Complete(r) in place of
// Complete(src.Reconciler(r))) would leave the commit where it is and, once
// MaxPending requests were outstanding, stall the feed without a word, so
// WaitForSync returns ErrNotWrapped (and logs it) when Reconciler was
// never called, and the controller, and the manager's Start, fail with
// it. After a crash or a restart, the events after the committed offset
// are delivered again (at least once) and nothing before it is: a restart
// reconciles what changed, not every object.
//
// # Requeue timers
//
// (Result{RequeueAfter: d}, nil) is, as controller-runtime reads it, "done,
// look again in d": it completes the request's events, so a key that always
// asks to be looked at again (a periodic check) never pins the commit. The
// timer is kept durably instead: the wrapper records key → due time, and
// the committer writes them to a file beside the journal (TimersPath: the
// journal's path, the consumer's name, ".timers"; replaced whole,
// atomically) before each commit, so every commit that passes such an
// event has its timer on disk (a due time a later reconcile moved without
// a commit is written within 10 s; unwritten, the timer fires earlier
// after a restart, never later). Start re-arms each stored timer on the
// controller's queue (AddAfter(due - now), at once when due): a restart
// with nothing changed reconciles the keys whose timers are due, and
// nothing else. A completion without RequeueAfter clears the key's timer;
// an error or Requeue leaves it.
//
// # Bounds
//
// At most Options.MaxPending events are queued and not yet reconciled: the
// source reads no more than the room left and waits for reconciles to
// free it. A consumer that retention's hard byte cap passed (its events
// are gone) is resynchronized as an informer restarts: every key of the
// index is queued, a page of at most the room left at a time, and the
// feed goes on after the head read when it began; deletes among the
// trimmed events are not seen.
//
// # Sync
//
// WaitForSync (called by the controller before it starts its workers)
// returns once the journal's writer is synced with the server and every
// event journaled up to then has been queued, as an informer's HasSynced
// implies its initial items were handed to the handlers.
//
// # Leader election and a warm standby
//
// With the manager's leader election, give each replica its own journal
// file (its own volume or path) and set Options.Standby:
//
//	src, err := crsource.New(cfg, crsource.Options{Path: "/data/cm.db", Resource: res,
//		Standby: &crsource.Standby{Namespace: "mirror-system", Name: "mirror-position"}})
//	err = src.AddToManager(mgr) // the writer on every replica, the publisher on the leader
//	err = ctrl.NewControllerManagedBy(mgr).Named("mirror").
//		WatchesRawSource(src).
//		Complete(src.Reconciler(&MyReconciler{}))
//
// Every replica runs the journal's writer (a Runnable whose
// NeedLeaderElection is false, like controller-runtime's cache), so a
// standby's journal is current when it takes over; the controller, and
// so the source, run on the leader only. The leader publishes how far it
// has reconciled as a resourceVersion, the position, in the annotation
// AnnotationPosition of a Lease of its own (Standby.Name in
// Standby.Namespace; not the leader-election Lease, which client-go's
// LeaseLock updates from the copy it last read: a foreign write would make
// its renew conflict). The position is the resourceVersion of the last
// committed event seen on a watch, or the journal's resourceVersion once
// the commit reaches the head (which moves on with the watch's bookmarks
// while nothing changes); it is written when it moved, at most every
// Standby.Interval (or Standby.Commits commits), and once more on a
// graceful stop, before the manager releases the election Lease (with
// LeaderElectionReleaseOnCancel the next leader takes over at once and
// reads it). RBAC: get, create and update on leases.coordination.k8s.io
// in Standby.Namespace, as leader election needs.
//
// A new leader reads the position and delivers from its own journal right
// after the last event seen on a watch whose resourceVersion is at or
// before it (compared with CompareResourceVersion; where that refuses the
// resourceVersions, the event whose resourceVersion equals it): every
// change after the position is delivered, and of those before it only
// what its journal cannot rule out, such as a relist's events (in key
// order, with the objects' own resourceVersions, they do not say when
// they happened, so they are delivered again). Failover reconciles what
// changed since the old leader's last published position, not every
// object: in the test, the 15 objects changed after the leader stopped,
// of 71. After a crash (no final publish; the next leader waits out the
// election Lease) it is up to Standby.Interval of changes more: 25 of 71
// in the test. When this replica's own commit is later, it starts there.
//
// A position it cannot place starts a resync (every key of the index is
// queued, as in "Bounds"), and the log says why: no position published
// (the first leader), a position for another resource, or one older than
// what retention left of this replica's journal. While a replica stands
// by, it commits its consumer behind the published position, so retention
// trims its journal as the leader's.
//
// Two replicas on one file is not supported: the journal file is locked
// from New on, so the second replica's New fails, after journal.Options'
// lock timeout of 1 s, with an error matching journal.ErrLocked
// ("database file is locked by another process: ... (waited 1s)"), before
// its manager starts. Without Options.Standby, AddToManager adds the
// writer alone, and a new leader starts from its own committed offset (a
// standby whose consumer never committed delivers every event it
// retains).
//
// # Shutdown
//
// When the context given to Start is done, the writer, the feeder and the
// committer stop and the journal closes; Done is closed after that. With
// AddToManager, the journal closes, and Done is closed, once the writer
// Runnable has stopped too. A clean
// shutdown is not an error (as controller-runtime's Start and
// reconcile.Loop.Run): Err then returns nil.
package crsource
