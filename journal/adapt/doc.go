// Package adapt lets code written for client-go read a journal: a
// watch.Interface in the shape of client-go's RetryWatcher (Watcher), and a
// feed for a cache.ResourceEventHandler in the shape of an informer's
// (Handle).
//
// The difference from the originals is what happens on 410 Gone: the
// journal's writer (package reconcile) relists and journals the exact gap,
// so a Watcher keeps going where a RetryWatcher stops, and a handler gets
// the deletes that happened while the process was down.
//
// # Objects
//
// Stored objects are decoded with Options.Decode (default: into
// *unstructured.Unstructured). A DELETED inferred by a relist has no final
// object; it is delivered as a metadata-only object (name, namespace, UID,
// last resourceVersion), and to a handler wrapped in
// cache.DeletedFinalStateUnknown, as an informer does for deletes it finds
// by relisting.
package adapt
