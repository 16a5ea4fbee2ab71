// Package reconcile keeps a journal.Journal in step with one resource of a
// kube-apiserver: it lists, watches, and after a 410 Gone, an expired
// continue token or a restart whose resourceVersion is no longer served, it
// relists and diffs the list against the on-disk index, so the journal gets
// exactly the ADDED, MODIFIED and DELETED events that close the gap.
//
// # Protocol
//
// The loop is the list/watch protocol of the API concepts page ("Efficient
// detection of changes"), written as an explicit state machine (state.go),
// one function per state that makes its request and returns the next
// state, the backoff a state of its own (as kube-rs's watcher steps):
//
//	start     → watch(stored RV, check)     when the file holds a resourceVersion
//	start     → list                        otherwise
//	watch     → list (restart)              check: the server's RV compares below the stored one (rewound)
//	watch     → list (restart)              check: a list at exactly the stored RV answers 410
//	watch     → watch(last RV, check)       the watch request got no answer (an outage)
//	list      → watch(list RV, same conn.)  a streaming list reached its initial-events-end bookmark
//	list      → list (paginated)            the server refused a streaming list: remembered in the file (listmode.go)
//	list      → list (lookups)              a page or batch broke key order
//	list      → list (full pages)           the server serves no metadata-only lists
//	list      → list                        a streaming list answered 410: again, at most 3 times in a row
//	list      → backoff → list              a streaming list broke or failed before its bookmark: nothing committed
//	list      → watch(list RV)              after a complete paginated list
//	list      → list                        a continue token expired (410): from page one
//	watch     → watch(last RV)              the server ended the watch normally, or its connection ended (EOF, probable EOF, timeout)
//	watch     → list                        410 Gone, in either shape
//	watch     → list                        500 "PrevKv=nil": the RV is just below etcd's compaction revision
//	watch     → list                        a frame shows the server replaying from scratch (replay.go)
//	watch     → verify                      Verify, the VerifyInterval deadline (anti-entropy), or a restart's resume proven (once)
//	verify    → list(verify at applied RV)  the applied RV is still served (a one-item list at exactly it)
//	verify    → list(verify at current RV)  it answered 410
//	watch     → watch(last RV)              nothing for IdleTimeout: a stalled connection
//	watch     → backoff → watch(last RV)    429, 5xx, network error, undecodable frame: never a relist
//	any       → backoff → same state        any other error (jittered, capped, floored by Retry-After)
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
//     the table above, and state.go;
//   - the lister interface (lister.go): one list in ordered batches, read
//     by streamLister (stream.go), pageLister (pages.go) or fullLister
//     (listfull.go); the one relist consumer that diffs, stages and
//     commits the batches into journalwrite.Relist (relist.go).
//
// # Server signals
//
// The backoff (Options.MinBackoff) is never shorter than the delay the
// server asks for. A watch the
// server refuses for any reason but a gone resourceVersion is retried as a
// watch, from the same resourceVersion, however often: a relist is the most
// expensive request a client can send to a server that sheds load
// (kubernetes/kubernetes#100878). The one refusal that relists besides 410
// is the apiserver's 500 "etcd event received with PrevKv=nil", its answer
// (watch cache off) to a watch from the revision just below etcd's
// compaction revision, which it will never serve; it is recognised by its
// message and logged at info (V(0)), as a 410 is. Throttling (429) is
// logged as such, at info.
//
// The backoff resets, and Status.LastError clears, after a list completes,
// after a watch frame is applied, and once a watch has stayed open
// (answered 200) for a second without an error: a healthy resume on a
// quiet resource clears the error too.
//
// # Logs
//
// Options.Logger (logr; the zero Logger discards) gets a failure through
// Error once per kind (phase, HTTP code and reason, or network operation),
// then at V(1) until the loop succeeds or the kind changes; state changes
// at V(0). Keys are field words: resource, resourceVersion, offset,
// origin, delay.
//
// # Transport
//
// Protobuf for the watches and streaming lists of built-in kinds, JSON
// for the rest and for every stored object (wire.go); no gzip unless
// Options.Compression; HTTP/1.1 unless the caller's rest.Config chooses,
// and the caller's Timeout on every request but watches: New says why.
// Kind and apiVersion, which list items lack, are written into each stored
// object, so every stored object decodes on its own. A metadata-only
// journal (Resource.MetadataOnly, required for Secrets unless
// Options.SecretPayloads with a journal that seals them, seal.go) asks
// for PartialObjectMetadata on lists and
// watches, without a fallback to full objects: a Secret's data never
// leaves the apiserver, and a server that cannot serve metadata only
// answers 406, which ends Run (ErrRejected); its objects are stored as the
// resource's kind (found by discovery). kubectl's
// last-applied-configuration annotation is dropped before anything is
// stored.
//
// A watch marked "check" first runs the resume check (probe.go): a
// one-item consistent list for the server's current resourceVersion, and,
// when it differs from the stored one, a one-item list at exactly the
// stored one. A rewind counts in Status.Rewinds; a 410 in Status.Gone.
//
// # Synced
//
// Status.Synced (HasSynced, WaitForSync) turns true once and stays true,
// on something the server said (Status.SyncedBy: a complete list, or a
// resumed watch the server proved current), never on a quiet interval: a
// 410 however late comes first. Details in synced.go.
//
// # Verify
//
// A verify lists at exactly the resourceVersion the journal applied, so
// index and list describe the same moment, and resumes the watch from it;
// its deadline is wall-clock, kept across watches. One more runs soon
// after every restart that resumed from the stored resourceVersion, once
// the resume is proven (a restored etcd the resume check cannot see).
// Details in verify.go.
//
// # Relist
//
// A list, the first one or a relist, is a streaming list where the server
// serves it (KEP-3157): one watch request with sendInitialEvents=true,
// resourceVersionMatch=NotOlderThan and resourceVersion unset (a consistent
// read), whose initial ADDED events are diffed against the index as they
// stream in, in batches of PageSize objects or 4 MiB, staged on disk, and
// committed at the resourceVersion of the k8s.io/initial-events-end
// bookmark; the connection then goes on as the watch. A server that
// refuses it (400, 405, 406 or 422, such as kube-apiserver with
// --feature-gates=WatchList=false; or one that ignores sendInitialEvents)
// gets paginated lists: the choice and its reason are in Status.ListMode
// and ListModeReason and in the file, and a streaming list is tried again
// after Options.StreamingRetry (listmode.go). A verify is always paginated
// (it reads at exactly one resourceVersion).
//
// A paginated list reads pages of Options.PageSize objects, resourceVersion
// unset. The first list of an empty index reads each page once, in full.
// A relist reads metadata only (PartialObjectMetadataList), and again in
// full, at the same snapshot, a page that holds changes. Pages of
// etcd-backed resources come in key order, so the diff is a merge of two
// sorted streams and memory stays bounded by one page; a page (or a
// streaming list's batch) that breaks that order starts the relist again,
// which then finds deletions by lookup. Only a complete list commits; a
// failed or partial one changes nothing. The files: "Where to find it".
//
// # Reasons
//
// Every DELETED the loop journals carries a journal.Reason. A name taken by
// a new UID gives the old one ReasonGone. Otherwise, for a journal with a
// label or field selector, kube-apiserver's DELETED (and a relist's
// absence) look the same whether the object was deleted or left the
// selector, so the loop asks: the key's name, metadata only, at exactly
// the event's (the list's) resourceVersion; the same UID there means
// ReasonLeftSelector, else ReasonGone; failures and more than 64 lookups
// in one batch or relist give ReasonUnconfirmed. A journal without a
// selector asks nothing: ReasonGone. Details in reason.go.
//
// # Timeouts and slow links
//
// No request is bounded as a whole: Options.RequestTimeout bounds the time
// to first byte, Options.ProgressTimeout a gap in a list page's body, so a
// page of large objects on a slow link takes as long as its bytes take. A
// page whose body breaks is requested again from the same continue token,
// and one that keeps breaking halves the page size. A streaming list's
// initial events are bounded the same way: a gap of ProgressTimeout or a
// cut abandons it, nothing of it committed, and it starts again after the
// backoff; once its bookmark came, its connection is the watch, bounded by
// IdleTimeout. A watch frame is bounded at 16 MiB, client-go's own bound
// (ErrFrameTooLarge).
//
// # Several resources
//
// A Group (OpenGroup) keeps several resources, one journal file each in
// one directory (FileName: configmaps.v1.db), under one Run, one
// HasSynced and WaitForSync, and one Status per resource. One file per
// resource keeps each journal's guarantees, lock and writer as package
// journal states them; group.go says why.
//
// # What it does not guarantee
//
// A relist sees only the state at the list's resourceVersion: several
// updates to one object while the watch was away become one MODIFIED, and an
// object created and deleted in the gap is never seen. Events are journaled
// once each, but consumers read at least once (see package journal).
package reconcile
