package crsource

import (
	"context"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
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
// and ctx's error) when ctx ends first: give ctx a deadline. After a
// Delete, pass the deleted object as the Delete's answer or the
// object read before: the wait ends once the journal's resourceVersion
// passes it (the next event of any object or the next bookmark, about
// once a minute on a quiet resource).
func (s *Source) WaitFor(ctx context.Context, obj metav1.Object) error {
	key := obj.GetName()
	if ns := obj.GetNamespace(); ns != "" {
		key = ns + "/" + key
	}
	return s.j.WaitForResourceVersion(ctx, key, obj.GetResourceVersion())
}
