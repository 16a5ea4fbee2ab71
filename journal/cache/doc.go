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
//	j, _ := journal.Open("cm.db", &journal.Options{Resource: &res})
//	loop, _ := reconcile.New(cfg, j, reconcile.Options{}) // the writer: go loop.Run(ctx)
//	r := cache.NewReader(j, scheme.Scheme)
//	var cm corev1.ConfigMap
//	err := r.Get(ctx, client.ObjectKey{Namespace: "demo", Name: "web"}, &cm)
//
// A controller-runtime operator needs none of this: package jcache is a
// whole cache (mgr.GetCache()) over journal files.
//
// # What a read sees
//
// Keeping objects is a switch of the journal file (journal.KeepObjects;
// NewReader and NewLister turn it on). Each index entry points at its
// key's last event with an object, and a read follows it into the journal
// record; the switch makes retention trimming copy a record that is still
// a key's latest into the objects bucket first (journal/objects.go). So it
// costs no append rate (the object is written once, in the journal; the
// entry grows ~5 bytes) and, on disk, at most one more copy of each live
// object whose last event was trimmed. Create the reader before the
// journal's retention first trims (before the writer and its compactor
// run) for a complete cache.
//
// Every Get and List is one bbolt read transaction over the index, the
// journal and the objects bucket: it sees one commit, never uncommitted
// state, and GetAt/ListAt return the journal offset it is current with
// (the head of that transaction: "I acted on the state as of offset N").
// Objects are decoded straight from bbolt's memory-mapped pages into the
// caller's object (into a typed list's items in place): nothing is kept on
// the heap between calls, and each call returns fresh objects the caller
// may change (as a DeepCopy would). Objects stored in Kubernetes protobuf
// (built-in kinds from a protobuf watch) decode with their generated
// Unmarshal; JSON into built-in API types with encoding/json/v2, others
// with sigs.k8s.io/json, both with client-go's case-sensitive rules
// (journal/internal/storedobj). Unstructured from protobuf converts the
// typed object (runtime.DefaultUnstructuredConverter): slower than typed.
//
// Objects are as served (JSON or protobuf); a metadata-only journal serves the
// metadata it stored (decode into metav1.PartialObjectMetadata or
// unstructured). A live key the file holds no object for (a file written
// before objects were kept) is an error matching journal.ErrNoObject from
// Get and List.
//
// A key that is absent is a NotFound error (apierrors.IsNotFound), as
// from the apiserver and controller-runtime's cache.
package cache
