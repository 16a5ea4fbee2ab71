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
//	start     → watch(stored RV)            when the file holds a resourceVersion
//	start     → list                        otherwise
//	list      → watch(list RV)              after a complete paginated list
//	list      → list                        a continue token expired (410): from page one
//	watch     → watch(last RV)              the server ended the watch normally
//	watch     → list                        410 Gone, in either shape
//	watch     → list                        the server refused the watch 5 times in a row
//	watch     → list                        Verify, or every VerifyInterval (anti-entropy)
//	watch     → watch(last RV)              nothing for IdleTimeout: a stalled connection
//	any       → backoff → same state        any other error (jittered, capped)
//
// # Relist
//
// A relist reads pages of Options.PageSize objects with resourceVersion
// unset (a consistent read) and diffs each page as it arrives against the
// index range it covers (Diff), staging the changes on disk. With a
// non-empty index the pages are metadata only (PartialObjectMetadataList):
// a page that holds changes is read again in full, at the same snapshot,
// for the objects the events carry; the next page is requested while one
// is diffed. Pages of
// etcd-backed resources come in key order, so the diff is a merge of two
// sorted streams and memory stays bounded by one page. If a page breaks
// that order, the relist starts again and finds deletions by lookup instead.
// Only a complete list commits; a failed or partial one changes nothing.
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
// (logged at warn), down to one object, for that list and the loop's later
// ones. A watch frame is bounded at 16 MiB, client-go's own bound
// (ErrFrameTooLarge): nothing of it is journaled, and the watch resumes
// from the last resourceVersion applied.
//
// # What goes over the wire
//
// Objects are JSON, read with json-iterator field by field; kind and
// apiVersion, which list items lack, are written as fields of the parsed
// object, so every stored object decodes on its own. A metadata-only
// journal (Resource.MetadataOnly, required for Secrets unless
// Options.SecretPayloads) asks for PartialObjectMetadata on lists and
// watches, without a fallback to full objects: a Secret's data never
// leaves the apiserver, and a server that cannot serve metadata only
// answers 406, which ends Run (ErrRejected). Its objects are stored as the
// resource's kind (found once by discovery) with metadata only. kubectl's
// last-applied-configuration annotation is metadata and so is sent; it is
// dropped before anything is stored.
//
// # What it does not guarantee
//
// A relist sees only the state at the list's resourceVersion: several
// updates to one object while the watch was away become one MODIFIED, and an
// object created and deleted in the gap is never seen. Events are journaled
// once each, but consumers read at least once (see package journal).
package reconcile
