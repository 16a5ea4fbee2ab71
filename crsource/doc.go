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
// that started after the event was queued returned success: a nil error,
// no Requeue and no RequeueAfter. An error or a requeue holds the commit
// back until a later reconcile of that key succeeds; a
// reconcile.TerminalError counts as done (controller-runtime does not retry
// it either). The wrapper returned by Reconciler records these outcomes,
// and it is required: a reconciler not wrapped (Complete(r) in place of
// Complete(src.Reconciler(r))) would leave the commit where it is and, once
// MaxPending requests were outstanding, stall the feed without a word, so
// WaitForSync returns ErrNotWrapped (and logs it) when Reconciler was
// never called, and the controller, and the manager's Start, fail with
// it. After a crash or a restart, the events after the committed offset
// are delivered again (at least once) and nothing before it is: a restart
// reconciles what changed, not every object.
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
// # Shutdown
//
// When the context given to Start is done, the writer, the feeder and the
// committer stop and the journal closes; Done is closed after that. A clean
// shutdown is not an error (as controller-runtime's Start and
// reconcile.Loop.Run): Err then returns nil.
package crsource
