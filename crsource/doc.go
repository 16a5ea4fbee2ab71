// Package crsource feeds a controller-runtime controller from a watchjournal
// journal: a source.TypedSyncingSource[reconcile.Request] (the interface
// source.Kind implements) whose durable position advances only past events
// whose requests were all reconciled successfully. It runs the journal's
// writer itself, so operator code imports controller-runtime's reconcile
// package and never watchjournal's (source.go says why the name).
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
// # Guarantees
//
//   - Every journal event, live or inferred by a relist, becomes a request
//     for its key; a DELETED of reason moved (package shards) is not
//     queued (source.go, "Delivery" and "Reasons").
//   - The commit moves past an event only once a reconcile of its key that
//     started after it completed: nil error (with or without RequeueAfter)
//     or a TerminalError. Reconciler's wrapper is required (ErrNotWrapped).
//     A restart delivers the events after the commit again (at least once)
//     and nothing before it (source.go, "Commit").
//   - RequeueAfter timers survive a restart in TimersPath's file and fire
//     no later than asked (source.go, "Requeue timers").
//   - At most Options.MaxPending requests are outstanding; a consumer
//     trimmed past is resynchronized (source.go, "Bounds").
//   - WaitForSync returns once the writer is synced and every event up to
//     then was queued; a clean shutdown is not an error (source.go).
//   - Under leader election with Options.Standby, each replica runs the
//     writer on its own file and a new leader starts after the position
//     the old one published on a Lease: failover reconciles what changed,
//     not every object (standby.go).
//   - Retention is on by default (DefaultRetention) and never trims an
//     uncommitted event unless a hard cap is set (retention.go).
//
// Probes: HealthzCheck and ReadyzCheck (health.go); read-your-writes:
// WaitFor (readyourwrites.go).
package crsource
