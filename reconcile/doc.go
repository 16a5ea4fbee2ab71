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
//	list      → watch(list RV)              after a complete paginated list
//	list      → list                        a continue token expired (410): from page one
//	watch     → watch(last RV)              the server ended the watch normally
//	watch     → list                        410 Gone, in either shape
//	watch     → list                        the server refused the watch 5 times in a row
//	watch     → list(verify at applied RV)  Verify, or the VerifyInterval deadline (anti-entropy)
//	watch     → watch(last RV)              nothing for IdleTimeout: a stalled connection
//	any       → backoff → same state        any other error (jittered, capped)
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
// resourceVersion as of the check; a resumed watch quiet for 1 s (no
// ERROR frame, no frame since the history it replayed was applied) after
// the check's list at exactly its resourceVersion succeeded.
// Status.SyncedOffset is the head offset then.
// Details in synced.go.
//
// # Verify
//
// A verify lists at exactly the resourceVersion the journal applied, so
// index and list describe the same moment, and resumes the watch from it;
// its deadline is wall-clock, kept across watches. Details in verify.go.
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
// # What it does not guarantee
//
// A relist sees only the state at the list's resourceVersion: several
// updates to one object while the watch was away become one MODIFIED, and an
// object created and deleted in the gap is never seen. Events are journaled
// once each, but consumers read at least once (see package journal).
package reconcile
