// Package reconcile keeps a journal.Journal in step with one resource of a
// kube-apiserver: it lists, watches, and after a 410 Gone, an expired
// continue token or a restart whose resourceVersion is no longer served, it
// relists and diffs the list against the on-disk index, so the journal gets
// exactly the ADDED, MODIFIED and DELETED events that close the gap.
//
//	j, err := journal.Open("configmaps.db", &journal.Options{Resource: &res})
//	loop, err := reconcile.New(cfg, j, reconcile.Options{})
//	err = loop.Run(ctx) // until ctx is done; nil on a clean shutdown
//
// A Group (OpenGroup) runs one Loop per resource, one file each (group.go).
//
// # Guarantees
//
//   - Only a complete list commits; a failed or partial one changes nothing.
//   - Every DELETED carries a journal.Reason (reason.go).
//   - Status.Synced turns true once, on something the server said, never on
//     a quiet interval (synced.go).
//   - A watch the server refuses is retried as a watch unless its
//     resourceVersion is gone: a relist is the most expensive request
//     (loop.go, "Server signals").
//   - A verify (Options.VerifyInterval, Loop.Verify) relists at the applied
//     resourceVersion and journals what the watch lost (verify.go).
//   - A watch batch is planned in memory and committed in the background
//     while the next frames are read: no frame waits for the fsync of the
//     batch before it to reach Options.Staged, and each batch commits
//     exactly what was planned or nothing (pipeline.go).
//
// # Where to find it
//
//   - the relist diff, a pure function: Diff (diff.go), and Fold for one
//     watch event;
//   - the states, one function each: stateStart → Loop.start and
//     stateBackoff → Loop.backoffWait (loop.go), stateList → Loop.list
//     (list.go, with listFailed: what a failed list leads to),
//     stateVerify → Loop.verifyCheck (verify.go), stateWatch → Loop.watch
//     (watch.go), or Loop.checkResume (probe.go) while its check is due;
//     the transition table opens state.go;
//   - the lister interface (lister.go): one list in ordered batches, read
//     by streamLister (stream.go), pageLister (pages.go) or fullLister
//     (listfull.go); the one relist consumer that diffs, stages and
//     commits the batches as the journal's staged relist (relist.go, with
//     how lists and relists run);
//   - requests, transport and timeouts: client.go, wire.go, transfer.go;
//     backoff and logs: loop.go.
//
// # What it does not guarantee
//
// A relist sees only the state at the list's resourceVersion: several
// updates to one object while the watch was away become one MODIFIED, and an
// object created and deleted in the gap is never seen. Events are journaled
// once each, but consumers read at least once (see package journal).
package reconcile
