// Package reconcile keeps a journal.Journal in step with one resource of a
// kube-apiserver: it lists, watches, and after a 410 Gone, an expired
// continue token or a restart whose resourceVersion is no longer served, it
// relists and diffs the list against the on-disk index, so the journal gets
// exactly the ADDED, MODIFIED and DELETED events that close the gap.
//
// # Protocol
//
// The loop is the list/watch protocol of the API concepts page ("Efficient
// detection of changes"), written as an explicit state machine (state.go):
//
//	start     → watch(stored RV, check)     when the file holds a resourceVersion
//	start     → list                        otherwise
//	watch     → list (restart)              check: the server's RV compares below the stored one (rewound)
//	watch     → list (restart)              check: a list at exactly the stored RV answers 410
//	watch     → watch(last RV, check)       the watch request got no answer (an outage)
//	list      → watch(list RV, same conn.)  a streaming list reached its initial-events-end bookmark
//	list      → list (paginated)            the server refused a streaming list: remembered in the file (listmode.go)
//	list      → list                        a streaming list answered 410: again, at most 3 times in a row
//	list      → backoff → list              a streaming list broke or failed before its bookmark: nothing committed
//	list      → watch(list RV)              after a complete paginated list
//	list      → list                        a continue token expired (410): from page one
//	watch     → watch(last RV)              the server ended the watch normally, or its connection ended (EOF, probable EOF, timeout)
//	watch     → list                        410 Gone, in either shape
//	watch     → list                        500 "PrevKv=nil": the RV is just below etcd's compaction revision
//	watch     → list                        a frame shows the server replaying from scratch (replay.go)
//	watch     → list(verify at applied RV)  Verify, the VerifyInterval deadline (anti-entropy), or a restart's resume proven (once)
//	watch     → watch(last RV)              nothing for IdleTimeout: a stalled connection
//	watch     → backoff → watch(last RV)    429, 5xx, network error, undecodable frame: never a relist
//	any       → backoff → same state        any other error (jittered, capped, floored by Retry-After)
//
// # Server signals
//
// The backoff is exponential from Options.MinBackoff to MaxBackoff with
// jitter, and never shorter than the delay the server asks for (Retry-After,
// details.retryAfterSeconds: apierrors.SuggestsClientDelay). A watch the
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
// quiet resource clears the error too. A failure is logged once per kind
// (phase, HTTP code and reason, or network operation), through logr's
// Error, then at V(1) until the loop succeeds or the kind changes.
//
// # Logs
//
// Options.Logger is a logr.Logger (what client-go, klog and
// controller-runtime speak; the zero Logger discards). Each line carries
// the key resource. Errors come through Error, once per kind of failure;
// state changes (list complete, synced, relisting after a 410, a rewind, a
// halved page size) at V(0); repeats of a failure at V(1). Keys are field
// words: resourceVersion, offset, origin, delay.
//
// # Transport
//
// Protobuf for the watches and streaming lists of built-in kinds, JSON
// for the rest and for every stored object (wire.go); no gzip unless
// Options.Compression; HTTP/1.1 unless the caller's rest.Config chooses,
// and the caller's Timeout on every request but watches: New says why.
//
// A watch marked "check" first runs the resume check (probe.go): a
// one-item consistent list for the server's current resourceVersion, and,
// when it differs from the stored one, a one-item list at exactly the
// stored one. A rewind counts in Status.Rewinds; a 410 in Status.Gone.
//
// # Synced
//
// Status.Synced (HasSynced, WaitForSync) turns true once and stays true,
// at the first of: a complete list committed; a resumed watch whose
// resourceVersion the check found equal to the server's; a resumed watch
// whose events or bookmarks carried the journal to the server's
// resourceVersion as of the check; a resumed watch that the server ended
// normally (at its timeoutSeconds, 2 s for a resume yet to be proven) with
// no ERROR frame. Each is something the server said, never a quiet
// interval: a 410 however late comes first. Status.SyncedOffset is the
// head offset then, Status.SyncedBy the proof.
// Details in synced.go.
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
// serves it (KEP-3157, stream.go): one watch request with
// sendInitialEvents=true, resourceVersionMatch=NotOlderThan and
// resourceVersion unset (a consistent read), whose initial ADDED events
// are diffed against the index as they stream in, in batches of PageSize
// objects or 4 MiB, staged on disk, and committed at the resourceVersion
// of the k8s.io/initial-events-end bookmark; the connection then goes on
// as the watch. A server that refuses it (400, 405, 406 or 422, such as
// kube-apiserver with --feature-gates=WatchList=false; or one that ignores
// sendInitialEvents) gets paginated lists: the choice and its reason are
// in Status.ListMode and ListModeReason and in the file, and a streaming
// list is tried again after Options.StreamingRetry (listmode.go). A
// verify is always paginated (it reads at exactly one resourceVersion).
//
// A paginated list reads pages of Options.PageSize objects with
// resourceVersion unset (a consistent read). The first list of an empty
// index reads each page once, in full, and stages its objects as they
// stream in (listfull.go). A relist diffs each page as it arrives against the
// index range it covers (Diff), staging the changes on disk. With a
// non-empty index the pages are metadata only (PartialObjectMetadataList):
// a page that holds changes is read again in full, at the same snapshot,
// for the objects the events carry; the next page is requested while one
// is diffed. Pages of
// etcd-backed resources come in key order, so the diff is a merge of two
// sorted streams and memory stays bounded by one page. If a page (or a
// streaming list's batch) breaks that order, the relist starts again and
// finds deletions by lookup instead.
// Only a complete list commits; a failed or partial one changes nothing.
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
// No request is bounded as a whole. Options.RequestTimeout is the time to
// first byte: a list page or a watch must begin its response (status and
// headers) within it (ErrNoResponse). Options.ProgressTimeout bounds a gap
// in a list page's body: a read that waits that long without a byte
// abandons the page (ErrNoProgress). A page of large objects on a slow link so takes as long
// as its bytes take, as long as they keep coming. A page whose body breaks
// once begun (a gap, a cut, an early end) is requested again from the same
// continue token, without starting the list over; a page that breaks twice
// in a row is taken as too large for the link, and the page size halves
// (logged at V(0)), down to one object, for that list and the loop's later
// ones. A streaming list's initial events are bounded the same way: a gap
// of ProgressTimeout without a byte (ErrNoProgress) or a cut abandons it,
// nothing of it committed, and it starts again after the backoff; once
// its bookmark came, its connection is the watch, bounded by IdleTimeout.
// A watch frame is bounded at 16 MiB, client-go's own bound
// (ErrFrameTooLarge): nothing of it is journaled, and the watch resumes
// from the last resourceVersion applied.
//
// # What goes over the wire
//
// Stored objects are JSON. Watch streams of built-in kinds come in
// protobuf: each frame's key, UID and resourceVersion are read from the
// bytes of its metadata, and only an object that becomes an event is
// decoded into its Go type and encoded to JSON (wire.go). JSON responses
// are read with json-iterator field by field; kind and
// apiVersion, which list items lack, are written as fields of the parsed
// object, so every stored object decodes on its own. A metadata-only
// journal (Resource.MetadataOnly, required for Secrets unless
// Options.SecretPayloads and a journal that seals them, seal.go) asks for PartialObjectMetadata on lists and
// watches, without a fallback to full objects: a Secret's data never
// leaves the apiserver, and a server that cannot serve metadata only
// answers 406, which ends Run (ErrRejected). Its objects are stored as the
// resource's kind (found once by discovery) with metadata only. kubectl's
// last-applied-configuration annotation is metadata and so is sent; it is
// dropped before anything is stored.
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
