// Package adapt lets code written for client-go read a journal: a
// watch.Interface in the shape of client-go's RetryWatcher (Watcher), and a
// feed for a cache.ResourceEventHandler in the shape of an informer's
// (Handle). For controller-runtime, see package jcache (the cache, and
// jcache.Exact for restart-exact sources).
//
// The difference from the originals is what happens on 410 Gone: the
// journal's writer (package reconcile) relists and journals the exact gap,
// so a Watcher keeps going where a RetryWatcher stops, and a handler gets
// the deletes that happened while the process was down.
//
// # Use
//
// In place of a RetryWatcher, with a position that survives a restart:
//
//	c, err := j.Consumers().Open("my-watcher") // durable, in the journal file
//	w, err := adapt.WatchConsumer(c, nil)       // resumes after what was processed
//	defer w.Stop()
//	for ev := range w.ResultChan() { ... }      // watch.Event: ADDED, MODIFIED, DELETED, ERROR
//
// From a given offset, remembering nothing: adapt.NewWatcher(j, offset, nil)
// (0: the first retained offset; adapt.FromNow: what is appended from now).
// In place of an informer's handler registration:
//
//	c, err := j.Consumers().Open("my-controller")
//	err = adapt.Handle(ctx, c, handler, &adapt.Options{Decode: decode}) // nil once ctx is done
//
// Runnable examples: ExampleNewWatcher, ExampleWatchConsumer (across a
// restart) and ExampleHandle in example_test.go; run them with
// go test -run Example -v. The text go doc does not print examples
// (golang/go#26715); go doc -http and pkg.go.dev do.
//
// # Positions
//
// WatchConsumer commits a named journal.Consumer past an event once the
// receiver comes back for more (receives the next event from ResultChan)
// or calls Stop: an event received and not yet processed when the process
// dies is delivered again. Handle commits once each batch has been
// handled. Both are at-least-once across crashes. NewWatcher has no durable
// position: it starts at the offset it is given.
//
// # Objects
//
// Stored objects are decoded with Options.Decode, a journal/cache
// DecodeFunc[runtime.Object] (default: into *unstructured.Unstructured; a
// function over a scheme's UniversalDeserializer().Decode gives typed
// objects). A DELETED inferred by a relist has no final object: in a
// file that keeps objects (journal.Settings.KeepObjects) it carries the
// key's last stored object, elsewhere it is delivered as a metadata-only
// object (name, namespace, UID, last resourceVersion) labelled with the
// kind and apiVersion the file records (journal.TypeMeta); to a handler
// either is wrapped in
// cache.DeletedFinalStateUnknown, as an informer does for deletes it finds
// by relisting. Nothing depends on objects seen earlier in the process: a
// fresh process whose first event is such a tombstone decodes it.
//
// Handle's OnUpdate gets as old object the key's object before the change,
// read from the key's previous event in the journal (see Handle), so a
// filter comparing old and new labels or data works.
//
// # Reasons
//
// A DELETED is not always a deletion: its journal.Reason may say the object
// left the journal's label or field selector (left-selector) or moved to
// another shard (moved) and still exists. watch.Event and
// cache.ResourceEventHandler have no place for it, so both adapters keep
// their client-go shapes (an informer, too, delivers a selector exit as a
// delete) and offer the reason beside them: a Watcher's Events channel
// carries each event as an Event (watch.Event, offset, reason; IsDeletion)
// in place of ResultChan, and a handler that implements
// DeleteReasonHandler gets OnDeleteWithReason in place of OnDelete.
package adapt
