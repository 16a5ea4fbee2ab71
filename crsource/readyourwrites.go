package crsource

import (
	"context"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	toolscache "k8s.io/client-go/tools/cache"
)

// WaitFor blocks until the source's journal has applied obj's
// resourceVersion (journal.Journal.WaitForResourceVersion: the journal's
// resourceVersion, or the index entry of obj's key, at or past it), so that
// a read through the journal (journal/cache's Reader or Lister over
// Journal) sees obj as written or newer: read-your-writes after the
// controller's own Create, Update or Patch, with obj the object the write
// returned.
//
//	if err := r.Patch(ctx, cm, patch); err != nil { ... }
//	wctx, cancel := context.WithTimeout(ctx, 5*time.Second)
//	defer cancel()
//	if err := src.WaitFor(wctx, cm); err != nil { ... } // journal.ErrNotApplied on timeout
//	err = reader.Get(ctx, client.ObjectKeyFromObject(cm), &fresh)
//
// It returns a *journal.NotAppliedError (errors.Is journal.ErrNotApplied
// and ctx's error) when ctx ends first: give ctx a deadline. Not for a
// Delete: the Delete returns no resourceVersion of the deletion, and the
// object read before it holds one already applied, so the wait ends at
// once; use WaitForDeleted.
func (s *Source) WaitFor(ctx context.Context, obj metav1.Object) error {
	key := toolscache.MetaObjectToName(obj).String() // the journal's key: <namespace>/<name>, or <name>
	return s.j.WaitForResourceVersion(ctx, key, obj.GetResourceVersion())
}

// WaitForDeleted blocks until the source's journal has applied the delete
// of obj (its namespace, name and UID; the UID may be empty): its key gone
// from the index, or taken by an object of another UID
// (journal.Journal.WaitForDeleted), so that a read through the journal no
// longer finds it: read-your-deletes after the controller's own Delete.
// It returns a *journal.NotAppliedError (errors.Is journal.ErrNotApplied
// and ctx's error) when ctx ends first: give ctx a deadline.
func (s *Source) WaitForDeleted(ctx context.Context, obj metav1.Object) error {
	key := toolscache.MetaObjectToName(obj).String() // the journal's key: <namespace>/<name>, or <name>
	return s.j.WaitForDeleted(ctx, key, string(obj.GetUID()))
}
