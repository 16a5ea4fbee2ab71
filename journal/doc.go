// Package journal is watchjournal's public API: a durable record of one
// watched Kubernetes resource, kept in one file.
//
// For one resource (GVR, namespace, label and field selectors) a Journal
// keeps only key → (resourceVersion, UID) per object, the index, plus a
// bounded journal of Events with monotonically increasing offsets. Package
// reconcile fills it from list and watch; consumers read it from their own
// offsets.
//
// # Guarantees
//
//   - Index, journal and the last synced resourceVersion change together in
//     one transaction of the file, so a crash at any point loses nothing: after a
//     restart the index describes exactly the events in the journal.
//   - Offsets start at 1, increase by one per event and are never reused.
//   - Per key, the journal's sequence is consistent: no ADDED for a key that
//     is present, no MODIFIED or DELETED for a key that is absent; a name that
//     comes back with a new UID gives DELETED (old UID) then ADDED (new UID).
//   - A relist is staged on disk (<path>.relist) and made visible only
//     when its list is complete: a failed or partial list changes neither
//     index nor journal. The one exception, the first list into an empty
//     index, commits its ADDEDs as they come and clears the
//     resourceVersion, so the next list diffs against them (relist.go).
//   - resourceVersions are opaque strings, compared only for equality
//     (API concepts, "Resource versions").
//
// # Keys
//
// An index key is exactly the bytes <namespace>/<name> for a namespaced
// object and <name> for a cluster-scoped one. Keys and consumer names are
// keys of the file: an empty one or one longer than MaxKeyBytes (32 KiB) is
// refused with ErrBadKey where it enters (keys.go).
//
// # Identity
//
// A file records its Resource; Open refuses another (ErrResourceMismatch).
// Selectors are compared in canonical form, so "tier=web,app=x" and
// "app = x, tier == web" are the same resource (selector.go).
//
// # Errors
//
// ErrCorrupt means the file: a page the store cannot read. A panic in the
// function given to Update is the caller's: the transaction rolls back and
// the panic propagates from Update, leaving the file healthy.
//
// # Reasons
//
// A DELETED means the key left the journal, not always that the object was
// deleted: Event.Reason says which (ReasonGone, ReasonLeftSelector,
// ReasonMoved, ReasonUnconfirmed; empty for ordinary events and for files
// written before reasons, schema 1), and Event.IsDeletion says whether a
// consumer should act on it as a deletion. An ADDED with ReasonMoved
// arrived from another shard. The reason is stored with the event (record
// version 2, event.go), so every reader of the file, journalctl and the
// adapters included, sees the reason the writer found.
//
// # Consumers
//
// A Consumer reads from its own durable position: its committed offset is
// stored in the same file, so after a crash it resumes right after its last
// Commit (at-least-once). Registered consumers hold retention back.
//
// When retention has passed a consumer (a read returns a *TrimmedError,
// matching ErrTrimmed) the events in between are gone, and the consumer
// rebuilds its state instead of replaying:
//
//  1. head, err := j.Snapshot(fn): fn receives every index entry (key, UID,
//     resourceVersion), all read in one transaction that also gives head,
//     the offset the snapshot is exactly current with;
//  2. the consumer replaces its own state with the snapshot: keys it holds
//     that the snapshot lacks were deleted; keys whose UID or
//     resourceVersion differ changed (read their objects with
//     ViewObjects, see "Objects");
//  3. c.Seek(head + 1), then Next and Commit as usual.
//
// # Objects
//
// Every live key's latest object (JSON as served; metadata for a
// metadata-only journal) is readable from the file: its index entry holds
// the offset of its last event with an object, and a read follows it into
// the journal record (objects.go). With KeepObjects (opt-in; journal/
// cache's NewReader calls it) retention trimming copies a record that is
// still a key's latest into an objects bucket first, so the objects
// survive trimming as well as restarts and file rewrites, and follow
// relists (a relist's ADDED/MODIFIED carries the object, a tombstone
// removes it, and is stored with the key's last object so its readers
// keep the final state). ViewObjects reads them in one read transaction together
// with the head the read is current with; package journal/cache serves
// them as a controller-runtime client.Reader and a client-go-style lister.
// What it costs: objects.go.
// Switched on after trimming has already removed some key's latest event,
// that key reads as ErrNoObject until it changes (ObjectView.Missing
// lists such keys).
//
// # Secondary indexes
//
// Named index functions over the objects (AddIndexes, registered before
// the writer starts) are kept in buckets idx/<name>, updated by every
// write that changes a key's object in the same transaction as the object
// (appends, relist commits, a first list's direct appends): LookupIndex
// and ObjectView.Lookup read keys and objects of one commit. The file
// records the names; a name registered for the first time is built from
// the stored objects, a write made while a recorded name is not registered
// drops it (indexes.go).
//
// # Sealing
//
// The objects of sensitive resources (Secrets, DefaultSealResources, and
// Options.SealResources) are stored sealed with AES-256-GCM when the file
// is opened with Options.Keyring: in the journal records, the objects
// bucket and the relist's stage file alike. Reads open them with the
// keyring; without the key that sealed one, a read of its object is a
// *SealedError (ErrSealed) naming the key's ID, while the index, offsets,
// resourceVersions and UIDs stay readable. Keys rotate: the first key of
// the keyring seals, every key opens (seal.go, with the record mark that
// older builds refuse and the additional data that binds an object to its
// key and resource).
//
// # Conventions
//
//   - Shutdown: a call that runs until its context is done
//     (reconcile.Loop.Run, adapt.Handle, crsource.Source) returns nil when
//     it ends because the context was cancelled: a clean shutdown is not an
//     error, as for controller-runtime's Runnable.Start and the loop. A call
//     that waits for one thing (Wait, Consumer.Next, a WaitForSync) returns
//     ctx.Err(): its caller did not get what it waited for. An
//     adapt.Watcher closes ResultChan on Stop without an error event.
//   - A journal used after Close (or closed under a blocked call) returns
//     an error matching ErrClosed, from every read, write and wait.
//   - Batch sizes (Read, Consumer.TryNext, Consumer.Next): max 0 means
//     DefaultBatch, a negative max is ErrBadMax.
//   - Commits only move forward: Commit below the committed offset is
//     ErrCommitBackwards; Consumer.Reset rewinds (or skips) on purpose.
//   - The writer appends only well-formed events (ErrBadEvent: a known
//     Type, a Key, an Origin) that agree with the index (ErrKeyState,
//     above).
//   - The file records the resource's kind and apiVersion
//     (Resource.Kind, Journal.TypeMeta), so every event, a tombstone
//     included, decodes from the file alone.
//
// # Reading and writing
//
// Journal is the reader's API, with the settings a user chooses
// (SetRetention, KeepObjects). The writer's machinery (write
// transactions, the staged relist, retention trimming, Reshard) is this
// package's code but not its API: package reconcile, package compactor and
// the module's other writers reach it through the module's
// internal/journalwrite (write.go). A program writes a journal by running a
// reconcile.Loop: one writer per file.
//
// # Concurrency
//
// One process writes a file at a time (an exclusive file lock; a second
// writer gets ErrLocked), for the writer's whole life. Within that process
// any number of goroutines may read while the writer runs; reads use short
// read transactions. The writer closes and reopens the file after every
// 4,096 pages it writes (at most once a second), to give back the
// store's per-page bookkeeping (the store's refresh.go); it holds a lock
// of its own, on <path>.lock, across the reopen (the store's lock.go), so
// another writer's Open fails with ErrLocked then too. The lock file
// exists while a writer has the file open.
package journal
