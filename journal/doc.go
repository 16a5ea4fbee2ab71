// Package journal is watchjournal's public API: a durable record of one
// watched Kubernetes resource, kept in one file.
//
// For one resource (GVR, namespace, label and field selectors) a Journal
// keeps only key → (resourceVersion, UID) per object, the index, plus a
// bounded journal of Events with monotonically increasing offsets. Package
// reconcile fills it from list and watch; consumers read it from their own
// offsets:
//
//	j, err := journal.Open(path, nil)      // nil options: the defaults
//	c, err := j.Consumers().Open("audit") // holds retention back
//	evs, err := c.Next(ctx, 100)           // waits at the head
//	err = c.Commit(evs[len(evs)-1].Offset)
//
// # Guarantees
//
//   - Index, journal and the last synced resourceVersion change together in
//     one transaction, so a crash loses nothing: after a restart the index
//     describes exactly the events in the journal.
//   - Offsets start at 1, increase by one per event and are never reused.
//   - Per key the sequence is consistent: no ADDED for a present key, no
//     MODIFIED or DELETED for an absent one; a new UID under a name gives
//     DELETED (old UID) then ADDED (new UID). Event.Reason says why a key
//     left (event.go).
//   - A relist becomes visible only when its list is complete (relist.go).
//   - resourceVersions are opaque strings, compared only for equality (API
//     concepts, "Resource versions").
//   - Consumers are at-least-once: each resumes after its last Commit
//     (consumer.go, with how to rebuild after retention trimming).
//   - One writer per file (ErrLocked); any number of readers (journal.go).
//
// # Where to read more
//
// Keys: keys.go. The file's resource and selectors: selector.go. Errors:
// errors.go. Objects, secondary indexes and sealing: objects.go,
// indexes.go, seal.go. Conventions (shutdown, ErrClosed, batch sizes) and
// concurrency: journal.go. The write side, Writer, which whoever runs the
// loop holds (package reconcile): write.go.
package journal
