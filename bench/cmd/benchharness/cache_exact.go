package main

// The cache subjects beside the drop-in (cache.go): jcache-exact, the same
// operator on jcache.Exact (its controller watches a jcache.ExactSource
// through WatchesRawSource, its reconciler wrapped by the
// ExactController), and jcache-transform, the drop-in with
// cache.Options.DefaultTransform = TransformStripManagedFields (objects
// are stored transformed: its row shows what that saves on disk).
//
// Exact's promise decides what its restart measures: with nothing changed
// it delivers nothing, so the restart waits not for N reconciles but for
// the source to be idle (WaitForSync returned and its consumer has
// committed every event in the file), and counts the reconciles, which
// must be 0.

import (
	"context"
	"sync/atomic"
	"time"

	crcache "sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/handler"

	"github.com/watchjournal/watchjournal/jcache"
)

// The cache subjects beside crcache and jcache.
const (
	subjJCacheExact     = "jcache-exact"
	subjJCacheTransform = "jcache-transform"
)

// exactSource is an Exact source that records when its WaitForSync
// returned (the controller starts its workers then).
type exactSource struct {
	*jcache.ExactSource
	ready atomic.Int64 // UnixNano; 0 until WaitForSync returned
}

// WaitForSync is the ExactSource's, recording the time it returned.
func (s *exactSource) WaitForSync(ctx context.Context) error {
	err := s.ExactSource.WaitForSync(ctx)
	if err == nil {
		s.ready.CompareAndSwap(0, time.Now().UnixNano())
	}
	return err
}

// idle returns a channel closed once the source is ready and its consumer
// has committed every event in its file (polled every 5 ms): nothing is
// left to reconcile.
func (s *exactSource) idle(ctx context.Context) <-chan struct{} {
	ch := make(chan struct{})
	go func() {
		for ctx.Err() == nil {
			if s.ready.Load() != 0 {
				c, err := s.Committed()
				var h uint64
				if j := s.Journal(); j != nil && err == nil {
					h, err = j.Head()
				}
				if err == nil && h > 0 && c == h {
					close(ch)
					return
				}
			}
			select {
			case <-ctx.Done():
			case <-time.After(5 * time.Millisecond):
			}
		}
	}()
	return ch
}

// newExactSource builds the Exact source of the bench controller over the
// manager's cache c, and the reconciler wrapper it needs.
func newExactSource(c crcache.Cache, k cacheKind) (*exactSource, *jcache.ExactController) {
	ex := jcache.Exact(c, "bench")
	return &exactSource{ExactSource: ex.Kind(k.newObj(), &handler.EnqueueRequestForObject{})}, ex
}

// exactReady returns when s's WaitForSync returned, UnixNano; 0 for nil
// (not Exact) or not yet.
func exactReady(s *exactSource) int64 {
	if s == nil {
		return 0
	}
	return s.ready.Load()
}
