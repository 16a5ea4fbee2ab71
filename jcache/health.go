package jcache

// Health and read-your-writes over a cache's journals, found through the
// cache's informer for an object's kind (GetInformer, which creates it if
// needed, without waiting for its sync):
//
//	mgr.AddReadyzCheck("cache", jcache.ReadyzCheck(mgr.GetCache(), 0, &corev1.ConfigMap{}))
//	mgr.AddHealthzCheck("cache", jcache.HealthzCheck(mgr.GetCache(), &corev1.ConfigMap{}))
//	err = jcache.WaitFor(ctx, mgr.GetCache(), patched) // after the controller's own write
//
// Ready is each journal's loop synced, running and not failing past a bound
// (reconcile.Loop.Ready); healthy is no loop stopped on a fatal error
// (reconcile.Loop.Alive); WaitFor is journal.Journal.WaitForResourceVersion
// for the object's key and resourceVersion.

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	toolscache "k8s.io/client-go/tools/cache"

	crcache "sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
)

// ErrNotJournal is returned when the cache's informer for an object is not
// one of jcache's (a cache made by another NewCacheFunc), or could not be
// built.
var ErrNotJournal = errors.New("jcache: the informer is not a journal cache's")

// feedOf returns the feed behind c's informer for obj.
func feedOf(ctx context.Context, c crcache.Cache, obj client.Object) (*feed, error) {
	inf, err := c.GetInformer(ctx, obj, crcache.BlockUntilSynced(false))
	if err != nil {
		return nil, err
	}
	i, ok := inf.(*informer)
	if !ok {
		return nil, fmt.Errorf("%w: %T", ErrNotJournal, inf)
	}
	if i.f == nil {
		return nil, fmt.Errorf("%w: %w", ErrNotJournal, i.err)
	}
	return i.f, nil
}

// WaitFor blocks until the journal of obj's kind in c has applied obj's
// resourceVersion, so that a read through c (Get, List) sees obj as
// written or newer: read-your-writes after the controller's own Create,
// Update or Patch, with obj the object the write returned. Give ctx a
// deadline: when it ends first, the error is a *journal.NotAppliedError
// (journal.ErrNotApplied, and ctx's error). ErrNotJournal for a cache
// that is not jcache's.
func WaitFor(ctx context.Context, c crcache.Cache, obj client.Object) error {
	f, err := feedOf(ctx, c, obj)
	if err != nil {
		return err
	}
	key := toolscache.MetaObjectToName(obj).String() // the journal's key: <namespace>/<name>, or <name>
	return f.j.WaitForResourceVersion(ctx, key, obj.GetResourceVersion())
}

// WaitForDeleted blocks until the journal of obj's kind in c has applied
// obj's delete, so that a read through c (Get) no longer finds it:
// read-your-deletes after the controller's own Delete, with obj the
// object deleted (its namespace, name and UID; the UID may be empty).
// The key gone, or taken by an object of another UID, counts as deleted
// (journal.Journal.WaitForDeleted). WaitFor cannot be used for a delete:
// the Delete returns no resourceVersion, and the object's own is already
// applied, so WaitFor returns at once. Give ctx a deadline: when it ends
// first, the error is a *journal.NotAppliedError (journal.ErrNotApplied,
// and ctx's error). ErrNotJournal for a cache that is not jcache's.
func WaitForDeleted(ctx context.Context, c crcache.Cache, obj client.Object) error {
	f, err := feedOf(ctx, c, obj)
	if err != nil {
		return err
	}
	key := toolscache.MetaObjectToName(obj).String() // the journal's key: <namespace>/<name>, or <name>
	return f.j.WaitForDeleted(ctx, key, string(obj.GetUID()))
}

// probeTimeout bounds a checker's GetInformer.
const probeTimeout = 5 * time.Second

// ReadyzCheck returns a readiness checker of the journals of objs' kinds in
// c: nil when each loop is running, synced and not failing for longer
// than failingBound (0: reconcile.DefaultFailingBound); otherwise the
// first loop's reconcile.Loop.Ready error (reconcile.ErrNotReady), or
// ErrNotJournal. A file of ShardOptions.Owners that moves to another range
// after it had synced stays ready while it lists the part that entered,
// unless failing for longer than failingBound (feedrange.go).
func ReadyzCheck(c crcache.Cache, failingBound time.Duration, objs ...client.Object) healthz.Checker {
	return func(req *http.Request) error {
		return eachFeed(req, c, objs, func(f *feed) error { return f.ready(failingBound) })
	}
}

// HealthzCheck returns a liveness checker of the journals of objs' kinds
// in c: an error once a loop stopped on a fatal error
// (reconcile.Loop.Alive: ErrJournal, ErrRejected), or ErrNotJournal.
func HealthzCheck(c crcache.Cache, objs ...client.Object) healthz.Checker {
	return func(req *http.Request) error {
		return eachFeed(req, c, objs, func(f *feed) error { return f.alive() })
	}
}

func eachFeed(req *http.Request, c crcache.Cache, objs []client.Object, fn func(*feed) error) error {
	ctx := context.Background()
	if req != nil {
		ctx = req.Context()
	}
	ctx, cancel := context.WithTimeout(ctx, probeTimeout)
	defer cancel()
	for _, obj := range objs {
		f, err := feedOf(ctx, c, obj)
		if err != nil {
			return err
		}
		if err := fn(f); err != nil {
			return fmt.Errorf("%T: %w", obj, err)
		}
	}
	return nil
}
