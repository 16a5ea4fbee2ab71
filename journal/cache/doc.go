// Package cache reads a journal's objects from its file: a
// controller-runtime client.Reader (Reader) and a client-go-style lister
// (Lister), so an operator swaps its informer cache reads for reads from
// the journal with one line, and its memory stops growing with the
// objects.
//
// The name follows the field: controller-runtime's pkg/cache and
// client-go's tools/cache are where operators get their readers and
// listers today.
//
// # Use
//
//	src, _ := crsource.New(cfg, crsource.Options{Path: "cm.db", Resource: res})
//	r := cache.NewReader(src.Journal(), scheme.Scheme) // in place of mgr.GetCache()
//	var cm corev1.ConfigMap
//	err := r.Get(ctx, req.NamespacedName, &cm)
//
// # What a read sees
//
// Keeping objects is opt-in for a journal file (it costs write rate:
// journal/objects.go); NewReader and NewLister switch it on, so create
// them before the journal's writer first lists (before mgr.Start with
// crsource), or switch it on with journal.KeepObjects.
//
// Every Get and List is one bbolt read transaction over the objects
// bucket (journal/objects.go): it sees one commit, never uncommitted
// state, and GetAt/ListAt return the journal offset it is current with
// (the head of that transaction: "I acted on the state as of offset N").
// Objects are decoded straight from bbolt's memory-mapped pages into the
// caller's object: nothing is kept on the heap between calls, and each
// call returns fresh objects the caller may change (as a DeepCopy would).
//
// Objects are the JSON as served; a metadata-only journal serves the
// metadata it stored (decode into metav1.PartialObjectMetadata or
// unstructured). A live key the file holds no object for (a file written
// before objects were kept) is an error matching journal.ErrNoObject from
// Get and List.
//
// A key that is absent is a NotFound error (apierrors.IsNotFound), as
// from the apiserver and controller-runtime's cache.
package cache
