package jcache

// Informers controller-runtime drops before it runs them.
//
// An informer holds its feed (the journal file, locked) from the moment
// NewInformer builds it, so that reads and handler replays work before
// the cache starts; Run's end releases it. controller-runtime's
// RemoveInformer on an informer that has not run (the cache not started
// yet, or stopped already) deletes it from its map and closes a stop
// channel that no Run reads: the informer would hold its file, and a
// sync waiter its goroutine, until the process ends. So the cache keeps
// the informers it built, keyed as controller-runtime keys them (the
// object's kind of type, GVK), and its RemoveInformer stops those of the
// key that have not run, after controller-runtime's: stopUnstarted
// releases the feed, and a Run that comes after returns at once. The
// candidates are taken before controller-runtime's removal, so that an
// informer a concurrent GetInformer builds after it is never stopped.

import (
	"context"
	"sync"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"
)

// informerKey is how controller-runtime keys an informer: which of its
// maps (typed, unstructured, metadata-only) and the GVK.
type informerKey struct {
	kind string
	gvk  schema.GroupVersionKind
}

// keyOf returns obj's informerKey, its GVK read as controller-runtime
// reads it (apiutil.GVKForObject with the cache's scheme).
func keyOf(obj runtime.Object, s *runtime.Scheme) (informerKey, error) {
	gvk, err := apiutil.GVKForObject(obj, s)
	if err != nil {
		return informerKey{}, err
	}
	switch obj.(type) {
	case runtime.Unstructured:
		return informerKey{"unstructured", gvk}, nil
	case *metav1.PartialObjectMetadata, *metav1.PartialObjectMetadataList:
		return informerKey{"metadata", gvk}, nil
	default:
		return informerKey{"structured", gvk}, nil
	}
}

// builtInformers are the informers a cache built that may not have run.
type builtInformers struct {
	scheme *runtime.Scheme
	mu     sync.Mutex
	byKey  map[informerKey][]*informer
}

// add records i, built for objType. An objType without a GVK is not
// recorded: controller-runtime could not have asked for it.
func (b *builtInformers) add(objType runtime.Object, i *informer) {
	k, err := keyOf(objType, b.scheme)
	if err != nil {
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.byKey == nil {
		b.byKey = map[informerKey][]*informer{}
	}
	b.byKey[k] = append(b.byKey[k], i)
}

// take removes and returns the informers recorded for obj's key.
func (b *builtInformers) take(obj runtime.Object) []*informer {
	k, err := keyOf(obj, b.scheme)
	if err != nil {
		return nil
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	out := b.byKey[k]
	delete(b.byKey, k)
	return out
}

// RemoveInformer removes obj's informers (controller-runtime's
// Cache.RemoveInformer) and releases the files of those that never ran:
// their files are unlocked when it returns. A running informer stops as
// controller-runtime stops it, and releases its file when its Run
// returns.
func (c *Cache) RemoveInformer(ctx context.Context, obj client.Object) error {
	infs := c.built.take(obj)
	if err := c.Cache.RemoveInformer(ctx, obj); err != nil {
		return err
	}
	for _, i := range infs {
		i.stopUnstarted()
	}
	return nil
}

// stopUnstarted stops the informer if it has not run: built → stopped,
// its feed released. A Run after it returns at once.
func (i *informer) stopUnstarted() {
	i.mu.Lock()
	if i.started || i.stopped {
		i.mu.Unlock()
		return
	}
	i.stopped = true
	i.mu.Unlock()
	if i.f != nil {
		i.f.release()
	}
}
