package jcache

// informer: a client-go SharedIndexInformer whose store is a journal file.
//
// controller-runtime builds one per (object type, GVK, namespace scope)
// through cache.Options.NewInformer and reads it through GetIndexer (its
// CacheReader: Get by key, List, ByIndex). Here the indexer reads the
// journal's objects from disk (indexer.go) and every handler is fed from
// the journal (handler.go): a replay of the stored objects as OnAdd, then
// the journal's events. The store is written only by the feed's
// reconcile.Loop.
//
// States: built (file open, loop built: New reached discovery) → running
// (Run: the loop runs, handlers are fed) → stopped (Run's context ended:
// handlers stopped, the feed released; IsStopped). A built informer
// goes to stopped without running when its cache's RemoveInformer drops
// it (unstarted.go); one that is never run nor removed keeps its file
// open until the process ends.

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"reflect"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	toolscache "k8s.io/client-go/tools/cache"

	jc "github.com/watchjournal/watchjournal/journal/cache"
	"github.com/watchjournal/watchjournal/reconcile"
)

// informer implements toolscache.SharedIndexInformer over a feed.
type informer struct {
	f       *feed // nil when building failed (err)
	err     error // why the informer could not be built: SetTransform returns it
	objType runtime.Object
	gvk     schema.GroupVersionKind // set on decoded PartialObjectMetadata
	resync  time.Duration
	log     logr.Logger
	idx     *indexer
	disk    diskIndexes // indexes kept in the file (diskindex.go)
	// shard is the cache's shard group when the resource is sharded: the
	// handlers get only its range (shardfilter.go); nil otherwise.
	shard *shardGroup

	mu         sync.Mutex
	indexers   toolscache.Indexers
	handlers   map[*registration]struct{}
	runCtx     context.Context // set by Run
	started    bool
	stopped    bool
	errHandler toolscache.WatchErrorHandlerWithContext
	handlersWG sync.WaitGroup

	decoded decodedObjects // decoded at write time, for the handlers (decoded.go)
	recent  recentObjects  // given to handlers, for the Gets that follow (recent.go)
	// readGVK is the kind and apiVersion of the file's typed objects as
	// a read decodes them, noted by the first typed decode for a
	// handler; nil before it.
	readGVK atomic.Pointer[schema.GroupVersionKind]
	// plans are the planned Lists in flight of the informer's cache
	// (readplan.go); nil outside a cache.
	plans *readPlans

	// onDecode, when set, is applied to every object the informer
	// decodes; nil in a cache (the transform ran before the disk). Tests
	// count decodes or fail one with it.
	onDecode toolscache.TransformFunc
}

// hasHandlers reports whether a handler is registered.
func (i *informer) hasHandlers() bool {
	i.mu.Lock()
	defer i.mu.Unlock()
	return len(i.handlers) > 0
}

var _ toolscache.SharedIndexInformer = (*informer)(nil)

func newInformer(f *feed, err error, objType runtime.Object, gvk schema.GroupVersionKind, resync time.Duration, indexers toolscache.Indexers, log logr.Logger) *informer {
	inf := &informer{f: f, err: err, objType: objType, gvk: gvk, resync: resync, log: log,
		indexers: toolscache.Indexers{}, handlers: map[*registration]struct{}{}}
	maps.Copy(inf.indexers, indexers)
	inf.idx = &indexer{inf: inf}
	return inf
}

// decode turns a stored object into one of the informer's type, as a
// handler gets it: a typed object without TypeMeta. The object was
// transformed before it was stored (transform.go).
func (i *informer) decode(b []byte) (runtime.Object, error) { return i.decodeAs(b, false) }

// decodeRead is decode for a read (Get, List, an index): a typed object
// keeps its kind and apiVersion, as controller-runtime's reader sets them
// on the copies it returns (jcache has it skip that copy: newCache).
func (i *informer) decodeRead(b []byte) (runtime.Object, error) {
	if o := i.options(); o != nil && o.hooks.readDecodes != nil {
		o.hooks.readDecodes.Add(1)
	}
	return i.decodeAs(b, true)
}

func (i *informer) decodeAs(b []byte, typeMeta bool) (runtime.Object, error) {
	obj, err := i.decodeStored(b, typeMeta)
	if err != nil {
		return nil, err
	}
	return applyTransform(i.onDecode, obj)
}

// decodeStored decodes a stored object into one of the informer's type,
// untransformed; with typeMeta a typed object keeps its kind and
// apiVersion (decodeRead).
func (i *informer) decodeStored(b []byte, typeMeta bool) (runtime.Object, error) {
	switch i.objType.(type) {
	case *unstructured.Unstructured:
		return jc.Unstructured(b)
	}
	obj := reflect.New(reflect.TypeOf(i.objType).Elem()).Interface().(runtime.Object)
	if err := jc.DecodeInto(b, obj); err != nil {
		return nil, err
	}
	if _, ok := obj.(*metav1.PartialObjectMetadata); ok {
		obj.GetObjectKind().SetGroupVersionKind(i.gvk)
	} else if !typeMeta {
		// As a typed informer's objects: decoded without TypeMeta; the
		// kind and apiVersion a read keeps are noted (recent.go).
		if i.readGVK.Load() == nil {
			gvk := obj.GetObjectKind().GroupVersionKind()
			i.readGVK.Store(&gvk)
		}
		obj.GetObjectKind().SetGroupVersionKind(schema.GroupVersionKind{})
	}
	return obj, nil
}

// applyTransform returns t(obj), obj when t is nil.
func applyTransform(t toolscache.TransformFunc, obj runtime.Object) (runtime.Object, error) {
	if t == nil {
		return obj, nil
	}
	out, err := t(obj)
	if err != nil {
		return nil, err
	}
	ro, ok := out.(runtime.Object)
	if !ok {
		return nil, fmt.Errorf("jcache: the transform returned %T, not a runtime.Object", out)
	}
	return ro, nil
}

// AddEventHandler adds h with the informer's resync period.
func (i *informer) AddEventHandler(h toolscache.ResourceEventHandler) (toolscache.ResourceEventHandlerRegistration, error) {
	return i.AddEventHandlerWithOptions(h, toolscache.HandlerOptions{})
}

// AddEventHandlerWithResyncPeriod adds h with its own resync period.
func (i *informer) AddEventHandlerWithResyncPeriod(h toolscache.ResourceEventHandler, resync time.Duration) (toolscache.ResourceEventHandlerRegistration, error) {
	return i.AddEventHandlerWithOptions(h, toolscache.HandlerOptions{ResyncPeriod: &resync})
}

// AddEventHandlerWithOptions adds h: once the informer runs, h gets OnAdd
// for every stored object, read from disk, then the journal's events.
func (i *informer) AddEventHandlerWithOptions(h toolscache.ResourceEventHandler, o toolscache.HandlerOptions) (toolscache.ResourceEventHandlerRegistration, error) {
	if i.err != nil {
		return nil, i.err
	}
	resync := i.resync
	if o.ResyncPeriod != nil {
		resync = *o.ResyncPeriod
	}
	r := newRegistration(i, h, resync)
	i.mu.Lock()
	defer i.mu.Unlock()
	if i.stopped {
		return nil, fmt.Errorf("jcache: handler %v was not added to the informer of %s because it has stopped already", h, i.f.res)
	}
	i.handlers[r] = struct{}{}
	if i.started { // and not stopped: see RunWithContext
		i.startHandlerLocked(r)
	}
	return r, nil
}

func (i *informer) startHandlerLocked(r *registration) {
	ctx, cancel := context.WithCancel(i.runCtx)
	r.cancel = cancel
	i.handlersWG.Go(func() { r.run(ctx) })
}

// RemoveEventHandler stops feeding the handler; it returns once the
// handler is no longer called.
func (i *informer) RemoveEventHandler(handle toolscache.ResourceEventHandlerRegistration) error {
	r, ok := handle.(*registration)
	if !ok || r.inf != i {
		return fmt.Errorf("jcache: registration %v is not of this informer", handle)
	}
	i.mu.Lock()
	_, known := i.handlers[r]
	delete(i.handlers, r)
	cancel := r.cancel
	last := len(i.handlers) == 0
	i.mu.Unlock()
	if last {
		i.decoded.clear()
	}
	if known && cancel != nil {
		cancel()
		<-r.done
	}
	return nil
}

// GetStore returns the indexer.
func (i *informer) GetStore() toolscache.Store { return i.idx }

// GetIndexer returns the journal file as a read-only toolscache.Indexer.
func (i *informer) GetIndexer() toolscache.Indexer { return i.idx }

// GetController returns nil: there is no client-go controller (the
// journal's reconcile.Loop lists and watches).
func (i *informer) GetController() toolscache.Controller { return nil }

// Run runs the informer until stopCh is closed.
func (i *informer) Run(stopCh <-chan struct{}) {
	i.RunWithContext(wait.ContextForChannel(stopCh))
}

// RunWithContext starts the feed's loop (shared with the other informers
// of the resource) and the handlers, and returns once ctx is done and the
// handlers have stopped.
func (i *informer) RunWithContext(ctx context.Context) {
	if i.err != nil {
		<-ctx.Done()
		return
	}
	i.mu.Lock()
	if i.started || i.stopped {
		i.mu.Unlock()
		return
	}
	i.started, i.runCtx = true, ctx
	i.f.start()
	for r := range i.handlers {
		i.startHandlerLocked(r)
	}
	eh := i.errHandler
	i.mu.Unlock()
	if eh != nil {
		i.handlersWG.Go(func() { i.reportErrors(ctx, eh) })
	}
	<-ctx.Done()
	// Stopped before the wait: no handler starts (handlersWG.Go) once
	// Wait may run.
	i.mu.Lock()
	i.stopped = true
	i.mu.Unlock()
	i.handlersWG.Wait()
	i.f.release()
}

// reportErrors calls eh with each new error of the loop (Status.LastError),
// as a reflector calls its WatchErrorHandler. The reflector argument is a
// zero Reflector: there is none.
func (i *informer) reportErrors(ctx context.Context, eh toolscache.WatchErrorHandlerWithContext) {
	var last error
	for {
		var cur error
		err := i.f.waitFor(ctx, func(s reconcile.Status) bool {
			cur = s.LastError
			return cur != nil && cur != last
		})
		if err != nil {
			return
		}
		last = cur
		eh(ctx, &toolscache.Reflector{}, cur)
	}
}

// HasSynced reports the loop's HasSynced: the journal is current with the
// server. A ranged feed's stays true once a loop of it has synced, while
// another replaces it (feedrange.go).
func (i *informer) HasSynced() bool {
	return i.f != nil && (i.f.loop().HasSynced() || i.f.servedOnce.Load())
}

// HasSyncedChecker returns a DoneChecker closed once HasSynced.
func (i *informer) HasSyncedChecker() toolscache.DoneChecker {
	if i.f == nil {
		return doneChecker{name: "jcache", ch: make(chan struct{})}
	}
	return i.f.doneChecker("jcache "+i.f.res.String(), i.HasSynced, nil, nil)
}

// doneChecker returns a DoneChecker named name that is closed once synced
// is true: at once, or after the loop's sync, then (with progress) as
// soon as synced is true after a close of the channel progress returns
// (taken before each check). It is never closed when stop is closed or
// the feed closes first.
func (f *feed) doneChecker(name string, synced func() bool, progress func() <-chan struct{}, stop <-chan struct{}) doneChecker {
	ch := make(chan struct{})
	if synced() {
		close(ch)
		return doneChecker{name: name, ch: ch}
	}
	go func() {
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		go func() {
			select {
			case <-stop:
			case <-f.closed:
			case <-ctx.Done():
			}
			cancel()
		}()
		if f.waitForSync(ctx) != nil {
			return
		}
		for progress != nil {
			p := progress()
			if synced() {
				break
			}
			select {
			case <-p:
			case <-ctx.Done():
				return
			}
		}
		close(ch)
	}()
	return doneChecker{name: name, ch: ch}
}

// LastSyncResourceVersion returns the resourceVersion the journal holds.
func (i *informer) LastSyncResourceVersion() string {
	if i.f == nil {
		return ""
	}
	return i.f.loop().Status().ResourceVersion
}

// SetWatchErrorHandler sets a handler of the loop's errors.
func (i *informer) SetWatchErrorHandler(h toolscache.WatchErrorHandler) error {
	return i.SetWatchErrorHandlerWithContext(func(_ context.Context, r *toolscache.Reflector, err error) { h(r, err) })
}

// SetWatchErrorHandlerWithContext sets a handler of the loop's errors
// (Status.LastError, each new one once); before Run only.
func (i *informer) SetWatchErrorHandlerWithContext(h toolscache.WatchErrorHandlerWithContext) error {
	return i.beforeStart(func() error { i.errHandler = h; return nil })
}

// beforeStart calls set under the informer's lock, unless it has started,
// and returns its error.
func (i *informer) beforeStart(set func() error) error {
	i.mu.Lock()
	defer i.mu.Unlock()
	if i.started {
		return errors.New("jcache: the informer has already started")
	}
	return set()
}

// SetTransform sets the transform, before the informer has started: the
// feed applies it to every object before it is stored (transform.go);
// reads and events decode the stored, transformed objects. controller-runtime calls it right after building the informer:
// it also returns the error that kept the informer from being built
// (NewInformer cannot), and *TransformConflictError when another informer
// of the file set another transform.
func (i *informer) SetTransform(t toolscache.TransformFunc) error {
	if i.err != nil {
		return i.err
	}
	return i.beforeStart(func() error { return i.f.setTransform(i, t) })
}

// IsStopped reports whether Run's context has ended (Run returns once its
// handlers have stopped and the feed is released), or the loop has
// stopped on an error it does not retry.
func (i *informer) IsStopped() bool {
	i.mu.Lock()
	s := i.stopped
	i.mu.Unlock()
	return s || (i.f != nil && i.f.stopped())
}

// AddIndexers adds index functions, kept in the journal file from then on
// (diskindex.go); until that is done, or when it fails, they are evaluated
// at read time (indexer.go).
func (i *informer) AddIndexers(add toolscache.Indexers) error {
	i.mu.Lock()
	for k := range add {
		if _, ok := i.indexers[k]; ok {
			i.mu.Unlock()
			return fmt.Errorf("jcache: indexer conflict: %v", k)
		}
	}
	maps.Copy(i.indexers, add)
	i.mu.Unlock()
	i.indexOnDisk(add)
	return nil
}

func (i *informer) indexFunc(name string) (toolscache.IndexFunc, bool) {
	i.mu.Lock()
	defer i.mu.Unlock()
	f, ok := i.indexers[name]
	return f, ok
}

// doneChecker is a toolscache.DoneChecker.
type doneChecker struct {
	name string
	ch   chan struct{}
}

func (d doneChecker) Name() string          { return d.name }
func (d doneChecker) Done() <-chan struct{} { return d.ch }
