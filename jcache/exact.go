package jcache

// Exact: restart-exact delivery on the builder path, over the cache's own
// journal files.
//
// A controller built with For, Owns and Watches on this cache reconciles
// every object after a restart, as with controller-runtime's cache: its
// handlers get OnAdd for every stored object. Exact gives the builder's
// sources a durable position in the cache's files instead: a restart
// delivers only what is past the commit (changes and deletes, those a
// relist inferred too), and the timers of RequeueAfter that are due.
//
//	ex := jcache.Exact(mgr.GetCache(), "mirror")
//	err := ctrl.NewControllerManagedBy(mgr).Named("mirror").
//		WatchesRawSource(ex.Kind(&v1.Foo{}, &handler.EnqueueRequestForObject{}, preds...)).
//		WatchesRawSource(ex.Kind(&corev1.Secret{}, handler.EnqueueRequestForOwner(scheme, mapper, &v1.Foo{}, handler.OnlyControllerOwner()))).
//		Complete(ex.Reconciler(r))
//
// Like the cache's handlers, a source resyncs on the cache's SyncPeriod
// (cache.Options.SyncPeriod): every stored object queued again as an
// update (old and new the same), at most MaxPending at a time, recorded at
// the next event's offset so that the commit never passes them (resync).
//
// An ExactSource is source.Kind (object, handler, predicates) whose
// position survives a restart: it reads the journal file of its object's
// informer in this cache (one file, one watch: the cache's; never a second
// watch of the resource) with a durable journal consumer,
// "exact/<controller>/<apiVersion>/<Kind>" (an unstructured object adds
// "/unstructured", as typed and unstructured informers of a resource share
// a file; the type is read from the cache's scheme, TypeMeta set or not),
// or "exact/<controller>/<name>" for KindNamed: two sources of one
// controller that would share a consumer fail with ErrExactDuplicate, as
// one would commit past events the other has not reconciled; sources of
// one type each get a name that does not depend on the order of the
// calls), and commits it only past events whose
// requests all reconciled (package jcache/internal/delivery; Reconciler says
// which outcomes complete a request). Each source's consumer holds its
// file's retention back, as any journal consumer does, up to
// Retention.HardMaxBytes.
//
// Events. Each journal event becomes the controller-runtime event an
// informer handler would get (handler.go's dispatch, shared with the
// cache's handlers): ADDED a CreateEvent, MODIFIED an UpdateEvent with the
// complete old object, DELETED a DeleteEvent with the last object,
// DeleteStateUnknown for a delete a relist inferred. The predicates
// filter them, then the handler maps them to requests
// (EnqueueRequestForObject, EnqueueRequestForOwner,
// EnqueueRequestsFromMapFunc unchanged) on a queue that records which
// requests came from which offset (delivery.Queue). An event whose
// predicates or handler queue nothing is done at once.
//
// States of a source: built (Kind) → starting (Start: the informer is got
// from the cache and its loop synced) → replaying (no consumer: a
// CreateEvent for every stored object, IsInInitialList, as source.Kind's
// informer gives them) → following (the events after the position) →
// stopped (Start's context done: the committer commits once more, Done
// closed). A follower that retention trimmed past (the hard cap) deletes
// its consumer, says so in a log line, and replays again.
//
// Crash safety of a replay: the consumer is created only by the first
// commit after every replayed request reconciled (the replay's entries sit
// at offset 1, which keeps the commit point at 0 until they close), so a
// process that dies during a replay has no consumer and replays again.
// Until then a second consumer, "replaying:" and the consumer's name,
// holds retention at the head the replay started from (replayHold): the
// events after it, which the feed delivers once the replay queued every
// object, are kept under every soft limit however long the replay's
// reconciles take, so churn during a long replay cannot trim them and
// start the replay over. The first commit deletes it, and a start that
// finds the consumer deletes one a crash left.
//
// Requeue timers: a reconcile returning RequeueAfter completes its events;
// the controller's timers are kept in the cache directory, in the file
// "exact.<controller>.timers", written before each commit, and re-armed
// when the first of its sources starts (delivery.Timers).
//
// Builder-level predicates (WithEventFilter) do not apply to raw sources:
// controller-runtime gives them only to the sources it builds for For,
// Owns and Watches. Give an ExactSource its predicates in Kind.

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"path/filepath"
	"strconv"
	"sync"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"
	crcache "sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"

	"github.com/watchjournal/watchjournal/jcache/internal/delivery"
	"github.com/watchjournal/watchjournal/jcache/internal/position"
	"github.com/watchjournal/watchjournal/journal"
)

// ErrExactNotWrapped is returned by an ExactSource's WaitForSync, and so
// by the controller's and the manager's Start, when the controller's
// reconciler was not wrapped by ExactController.Reconciler: no
// reconcile's outcome would reach the sources, nothing would be committed,
// and requests would stop after ExactOptions.MaxPending.
var ErrExactNotWrapped = errors.New("jcache: the controller's reconciler is not wrapped by the Exact controller's Reconciler: " +
	"build the controller with Complete(ex.Reconciler(r)), not Complete(r); " +
	"unwrapped, nothing is committed and requests stop after ExactOptions.MaxPending")

// ErrExactCache is returned by an ExactSource's Start when its cache is not
// a jcache cache (New, NewFunc) or the object's informer is not one
// journal file (a cache with DefaultNamespaces, even of one namespace, or
// ByObject.Namespaces has one informer per namespace: controller-runtime
// builds its multi-namespace cache for them).
var ErrExactCache = errors.New("jcache: an Exact source needs a jcache cache whose informer of the object is one journal file (a cache of all namespaces: controller-runtime gives a cache with DefaultNamespaces, even one, an informer per namespace)")

// DefaultExactMaxPending is the default ExactOptions.MaxPending: it bounds
// the requests an ExactSource has queued and not yet seen reconciled (each a few dozen bytes in memory): its feed
// waits for reconciles when it is reached, and its WaitForSync returns.
// One event may queue several requests (a map function): the bound counts
// requests, read a batch of events at a time, so it may be passed by one
// batch's requests.
const DefaultExactMaxPending = 10000

// ExactController is restart-exact delivery for one controller: it makes
// the controller's sources (Kind) and wraps its reconciler (Reconciler),
// which reports every reconcile's outcome to all of them. Create it with
// Exact.
type ExactController struct {
	cache crcache.Cache
	name  string
	max   int // ExactOptions.MaxPending
	log   logr.Logger
	out   *delivery.Outcomes
	err   error // the timers file could not be read: every source's Start fails

	sb    *position.Standby // nil without ExactOptions.Standby (standby.go)
	hooks exactHooks        // ExactOptions.hooks

	finalCommit bool // a source commits once more when its context ends (ExactOptions.hooks)

	mu    sync.Mutex
	names map[string]int // Kind calls by object type (consumerName)
	// claimed holds each consumer a started source took (consumerName):
	// a KindNamed name can spell a Kind's type ("v1/ConfigMap"), which
	// only the files tell at Start.
	claimed map[string]*ExactSource
	srcs    []*ExactSource // Kind calls, in order
	rearm   sync.Once
}

// ExactOptions configure ExactWith.
type ExactOptions struct {
	// MaxPending bounds, per source, the requests queued and not yet
	// seen reconciled (DefaultExactMaxPending when 0 or less).
	MaxPending int
	// Standby, when set, makes the controller's sources a warm standby
	// under leader election (standby.go, at the top): the leader
	// publishes each source's position as a resourceVersion on a Lease,
	// and a new leader's sources start from their own journals at those
	// positions instead of replaying every object. Requires ExactController.AddToManager.
	Standby *Standby

	hooks exactHooks // tests' pauses in the sources' goroutines
}

// exactHooks are an Exact controller's test settings (testhooks.go):
// pauses in a source's goroutines at the points where they meet, and a
// SIGKILL-like stop; zero fields do nothing (export_test.go sets them).
type exactHooks struct {
	// trimmed is called by the feed once it marked the consumer for reset
	// (retention trimmed past it), before deleting it.
	trimmed func()
	// commit wraps each commit of the committer: it must call do once.
	commit func(p uint64, do func() error) error
	// noFinalCommit skips a source's last commit when its context ends
	// (a SIGKILL-like stop).
	noFinalCommit bool
	// beforeHold is called by a replay between its read of the head and
	// the creation of its hold at it.
	beforeHold func(head uint64)
}

// Exact returns restart-exact delivery for the controller named controller
// (its Named: the name is part of each source's consumer name and of the
// timers file, so it must stay the same across restarts) over c, the
// manager's cache (mgr.GetCache()), which must be a jcache cache. A cache
// of another kind fails each source's Start with ErrExactCache.
func Exact(c crcache.Cache, controller string) *ExactController {
	return ExactWith(c, controller, ExactOptions{})
}

// ExactWith is Exact with options.
func ExactWith(c crcache.Cache, controller string, o ExactOptions) *ExactController {
	if o.MaxPending <= 0 {
		o.MaxPending = DefaultExactMaxPending
	}
	e := &ExactController{cache: c, name: controller, names: map[string]int{}, claimed: map[string]*ExactSource{}, max: o.MaxPending, finalCommit: !o.hooks.noFinalCommit, hooks: o.hooks}
	jc, ok := c.(*Cache)
	if !ok {
		e.err = fmt.Errorf("%w: the cache is %T", ErrExactCache, c)
		e.out = delivery.NewOutcomes(nil)
		return e
	}
	e.log = jc.log.WithValues("controller", controller)
	if o.Standby != nil {
		sb, err := newExactStandby(e, *o.Standby)
		if err != nil {
			e.err = err
		}
		e.sb = sb
	}
	path := filepath.Join(jc.dir, "exact."+url.PathEscape(controller)+".timers")
	timers, err := delivery.LoadTimers(path)
	if err != nil {
		e.err = fmt.Errorf("jcache: controller %q: %w", controller, err)
	}
	e.out = delivery.NewOutcomes(timers)
	return e
}

// Reconciler wraps r so that every source of the controller learns each
// reconcile's outcome (delivery.Completes: a nil error, with or without
// RequeueAfter, or a TerminalError completes the request's events; an
// error or Requeue: true does not). Pass the wrapper to the controller
// (Complete, Build): it is required, and the sources' WaitForSync return
// ErrExactNotWrapped when it was never called.
func (e *ExactController) Reconciler(r reconcile.Reconciler) reconcile.Reconciler {
	return e.out.Wrap(r)
}

// ErrExactDuplicate is returned by the Start of an Exact source whose
// consumer another source of the controller has too: two Kind calls of
// one object type (typed, unstructured or metadata-only, the same GVK),
// or two KindNamed calls with one name. Give each a name with KindNamed.
var ErrExactDuplicate = errors.New("jcache: two Exact sources of one controller would share a consumer (one object type without names, or one name): give each its own name with KindNamed")

// Kind returns a source like source.Kind(cache, obj, h, preds...) whose
// position survives restarts (see ExactSource). Give it to the
// controller's builder with WatchesRawSource; the predicates filter its
// events (the builder's WithEventFilter does not apply to raw sources).
// Its consumer is named after the controller and the object's type
// ("exact/<controller>/<apiVersion>/<Kind>", "/unstructured" added for an
// unstructured object), the type read from the cache's scheme, not from
// obj's TypeMeta: one Kind per object type and controller; a second one
// fails its Start with ErrExactDuplicate (use KindNamed).
func (e *ExactController) Kind(obj client.Object, h handler.EventHandler, preds ...predicate.Predicate) *ExactSource {
	return e.kind("", obj, h, preds...)
}

// KindNamed is Kind with an explicit name: the source's consumer is
// "exact/<controller>/<name>", whatever the object's type and the order
// of the calls, so several sources of one type (a For and a Watches of
// ConfigMaps) keep their positions across versions of the operator that
// reorder them. The name must be a valid consumer name (journal.Consumer)
// and unique in the controller, and must not spell the consumer of one of
// its Kind sources ("v1/ConfigMap"), else ErrExactDuplicate at Start.
func (e *ExactController) KindNamed(name string, obj client.Object, h handler.EventHandler, preds ...predicate.Predicate) *ExactSource {
	return e.kind(name, obj, h, preds...)
}

func (e *ExactController) kind(name string, obj client.Object, h handler.EventHandler, preds ...predicate.Predicate) *ExactSource {
	t := delivery.NewTracker(0)
	e.out.AddTracker(t)
	s := &ExactSource{ctl: e, obj: obj, h: h, preds: preds, t: t, max: e.max, finalCommit: e.finalCommit,
		done: make(chan struct{}), synced: make(chan struct{}), failed: make(chan struct{})}
	if e.sb != nil {
		s.tracker.Signal = e.sb.Signal
	}
	s.named = name
	k := "name " + name
	if name == "" {
		k = "type " + e.typeKey(obj)
	}
	e.mu.Lock()
	e.names[k]++
	s.dup = e.names[k]
	e.srcs = append(e.srcs, s)
	e.mu.Unlock()
	return s
}

// consumerName returns the consumer of source s on journal j (see the
// top of the file), and j's position.Resource. Sources start
// concurrently, so the name depends only on what the builder was given,
// in its order.
func (e *ExactController) consumerName(j *journal.Journal, s *ExactSource) (name, resource string, err error) {
	kind, apiVersion, err := j.TypeMeta()
	if err != nil {
		return "", "", err
	}
	r, _, err := j.Resource()
	if err != nil {
		return "", "", err
	}
	if s.dup > 1 {
		return "", "", fmt.Errorf("%w: controller %q, %s", ErrExactDuplicate, e.name, s.what())
	}
	name = "exact/" + e.name + "/" + apiVersion + "/" + kind
	if _, ok := s.obj.(*unstructured.Unstructured); ok {
		name += "/unstructured"
	}
	if s.named != "" {
		name = "exact/" + e.name + "/" + s.named
	}
	// A consumer is one file's; with a standby, a position is published
	// by consumer name, so the name is claimed across files too (a typed
	// and a metadata-only source of one type).
	claim := j.Path() + "\x00" + name
	if e.sb != nil {
		claim = name
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if o, ok := e.claimed[claim]; ok && o != s {
		return "", "", fmt.Errorf("%w: controller %q, consumer %q of %s and of %s", ErrExactDuplicate, e.name, name, o.what(), s.what())
	}
	e.claimed[claim] = s
	return name, position.Resource(r), nil
}

// what names s in an error: its KindNamed name, else its object type.
func (s *ExactSource) what() string {
	if s.named != "" {
		return "name " + strconv.Quote(s.named)
	}
	return "object type " + s.ctl.typeKey(s.obj)
}

// typeKey names obj's type as the cache keys its informers (the GVK from
// the cache's scheme, typed, unstructured or metadata-only), TypeMeta set
// or not; the Go type when the scheme does not know it.
func (e *ExactController) typeKey(obj client.Object) string {
	if jc, ok := e.cache.(*Cache); ok {
		if k, err := keyOf(obj, jc.built.scheme); err == nil {
			return k.kind + " " + k.gvk.String()
		}
	}
	return fmt.Sprintf("%T", obj)
}

// ExactSource is a source.TypedSyncingSource[reconcile.Request] like
// source.Kind over the cache's journal file of its object (see the top of
// exact.go). Make it with ExactController.Kind; it can be started once.
type ExactSource struct {
	ctl   *ExactController
	obj   client.Object
	h     handler.EventHandler
	preds []predicate.Predicate
	t     *delivery.Tracker
	max   int
	dup   int    // the n-th Kind call of the controller with this object type (or name)
	named string // KindNamed's name; "" for Kind
	// finalCommit: the committer commits once more when the source's
	// context ends (the controller's, copied when Kind made the source).
	finalCommit bool

	consumer consumerState    // whether the consumer exists in the file (exactconsumer.go)
	tracker  position.Tracker // the position published for a standby (ExactOptions.Standby)

	mu       sync.Mutex
	started  bool
	j        *journal.Journal // set once the informer is got
	name     string           // the consumer
	resource string           // position.Resource of the journal (ExactOptions.Standby)
	log      logr.Logger
	err      error
	done     chan struct{}
	synced   chan struct{} // closed once the feed follows (after a replay)
	failed   chan struct{} // closed when the source stopped with an error
}

var _ source.TypedSyncingSource[reconcile.Request] = (*ExactSource)(nil)

// String names the source in controller-runtime's logs.
func (s *ExactSource) String() string {
	return fmt.Sprintf("jcache.Exact(%s, %T)", s.ctl.name, s.obj)
}

// Consumer returns the name of the source's journal consumer ("" before
// Start has got the informer).
func (s *ExactSource) Consumer() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.name
}

// Journal returns the journal file the source reads (nil before Start has
// got the informer).
func (s *ExactSource) Journal() *journal.Journal {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.j
}

// Committed returns the consumer's committed offset: 0 before the first
// commit (a replay not yet reconciled).
func (s *ExactSource) Committed() (uint64, error) {
	j, name := s.Journal(), s.Consumer()
	if j == nil {
		return 0, nil
	}
	off, err := j.Consumers().Committed(name)
	if errors.Is(err, journal.ErrNoConsumer) {
		return 0, nil
	}
	return off, err
}

// Done is closed once the source has stopped after its context ended.
func (s *ExactSource) Done() <-chan struct{} { return s.done }

// Err returns why the source stopped early (the informer could not be
// got, a journal read failed); nil while running and after a clean
// shutdown.
func (s *ExactSource) Err() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.err
}

func (s *ExactSource) fail(err error) {
	s.mu.Lock()
	if s.err == nil {
		s.err = err
		close(s.failed)
	}
	s.mu.Unlock()
	s.ctl.log.Error(err, "exact source stopped", "source", s.String())
}

// Start gets the object's informer from the cache, re-arms the
// controller's stored RequeueAfter timers (once per controller), and runs
// the feed (a replay first when there is no consumer) and the committer
// until ctx is done. It returns at once, as source.Kind's Start.
func (s *ExactSource) Start(ctx context.Context, q workqueue.TypedRateLimitingInterface[reconcile.Request]) error {
	s.mu.Lock()
	if s.started {
		s.mu.Unlock()
		return errors.New("jcache: exact source already started")
	}
	s.started = true
	s.mu.Unlock()
	if s.ctl.err != nil {
		return s.ctl.err
	}
	if sb := s.ctl.sb; sb != nil && !sb.Added() {
		return ErrStandbyNotAdded
	}
	s.ctl.rearm.Do(func() { s.ctl.out.Timers().Rearm(time.Now(), q.AddAfter) })
	go func() {
		defer close(s.done)
		if err := s.run(ctx, q); err != nil && ctx.Err() == nil && !errors.Is(err, journal.ErrClosed) {
			s.fail(err)
		}
	}()
	return nil
}

// WaitForSync returns once the informer's loop has synced, a replay (when
// there was no consumer) has queued every object, and every event
// journaled up to then is queued; or as soon as the feed waits for room
// (ExactOptions.MaxPending requests queued and not yet reconciled, in a
// replay or after it): the controller starts its workers only after
// WaitForSync, and the rest of the replay is queued as they reconcile, so
// a source over any number of objects starts with at most MaxPending
// requests queued. It returns early when ctx is done (its error) or the
// source failed (Err). It returns ErrExactNotWrapped, and logs it, when the
// controller's reconciler was not wrapped.
func (s *ExactSource) WaitForSync(ctx context.Context) error {
	if !s.ctl.out.Wrapped() {
		s.ctl.log.Error(ErrExactNotWrapped, "controller not started", "source", s.String())
		return ErrExactNotWrapped
	}
	return s.t.WaitSynced(ctx, s.synced, func() (uint64, error) {
		head, err := s.Journal().Head()
		if err != nil {
			return 0, fmt.Errorf("jcache: %w", err)
		}
		return head, nil
	}, s.failed, s.Err)
}

// informer returns the cache's informer of the object, one journal file.
func (s *ExactSource) informer(ctx context.Context) (*informer, error) {
	i, err := s.ctl.cache.GetInformer(ctx, s.obj)
	if err != nil {
		return nil, fmt.Errorf("jcache: exact source of %T: %w", s.obj, err)
	}
	inf, ok := i.(*informer)
	if !ok {
		return nil, fmt.Errorf("%w: the informer of %T is a %T", ErrExactCache, s.obj, i)
	}
	if inf.f == nil {
		return nil, inf.err
	}
	if inf.shard != nil {
		return nil, fmt.Errorf("%w: %s", ErrExactSharded, inf.f.res)
	}
	return inf, nil
}

func (s *ExactSource) run(ctx context.Context, q workqueue.TypedRateLimitingInterface[reconcile.Request]) error {
	inf, err := s.informer(ctx)
	if err != nil {
		return err
	}
	j := inf.f.j
	if err := inf.f.waitForSync(ctx); err != nil {
		return nil // ctx done
	}
	name, res, err := s.ctl.consumerName(j, s)
	if err != nil {
		return err
	}
	log := s.ctl.log.WithValues("consumer", name, "file", j.Path())
	s.mu.Lock()
	s.j, s.name, s.log, s.resource = j, name, log, res
	s.mu.Unlock()
	committed, err := j.Consumers().Committed(name)
	switch {
	case err == nil:
		s.consumer.set(true)
	case errors.Is(err, journal.ErrNoConsumer):
	default:
		return err
	}
	if s.ctl.sb != nil {
		exists := s.consumer.exists()
		if committed, exists, err = s.standbyStart(ctx, j, name, committed, exists); err != nil {
			return err
		}
		s.consumer.set(exists)
	}
	if s.consumer.exists() {
		if err := dropReplayHold(j, name); err != nil {
			return err
		}
	}
	s.t.Reset(committed)

	tq := delivery.NewQueue(q, s.t)
	var wg sync.WaitGroup
	defer wg.Wait()
	ctx, cancel := context.WithCancel(ctx) // the committer stops when run returns
	defer cancel()
	eh := &exactHandler{ctx: ctx, h: s.h, pred: predicate.And(s.preds...), q: tq.Interface(), log: log}
	wg.Go(func() {
		delivery.CommitLoop(ctx, s.t, committed, s.ctl.out.Timers(), func(p uint64) error { return s.commit(j, name, p) },
			func(err error) bool { return errors.Is(err, journal.ErrClosed) || errors.Is(err, errConsumerResetting) }, log, s.finalCommit)
	})

	pos := committed
	if !s.consumer.exists() {
		log.Info("no consumer: a create event for every object, as an informer's initial list")
		if pos, err = s.replay(ctx, inf, tq, eh); err != nil {
			return err
		}
	}
	close(s.synced)
	var tick <-chan time.Time // the cache's SyncPeriod, as its handlers resync
	if inf.resync > 0 {
		t := time.NewTicker(inf.resync)
		defer t.Stop()
		tick = t.C
	}
	var rs *resyncRun // a resync in progress (exactresync.go)
	defer func() {
		if rs != nil {
			rs.stop()
		}
	}()
	for {
		room, ok := s.t.WaitRoom(ctx, s.max)
		if !ok {
			return nil
		}
		if rs == nil {
			select {
			case <-tick:
				rs = startResync(ctx, inf)
			default:
			}
		}
		if rs != nil {
			tq.SetOffset(pos + 1)
			given, done := rs.give(eh, rs.share(room))
			room -= given
			if done {
				n := rs.n
				err := rs.finish()
				rs = nil
				if err != nil || ctx.Err() != nil {
					return err
				}
				log.V(1).Info("resync queued every object", "objects", n)
			}
			if room == 0 {
				continue
			}
		}
		evs, err := j.Read(pos+1, min(journal.DefaultBatch, room))
		if errors.Is(err, journal.ErrTrimmed) {
			log.Info("retention trimmed events this consumer had not committed (the hard byte cap): "+
				"deleting the consumer and sending a create event for every object, as an informer's relist; deletes among the trimmed events are not seen",
				"position", pos, "error", err.Error())
			if rs != nil { // the replay gives every object
				rs.stop()
				rs = nil
			}
			if err := s.consumer.reset(s.ctl.hooks.trimmed, func() error { return j.Consumers().Delete(name) },
				func() { s.t.Reset(0) }); err != nil {
				return err
			}
			if pos, err = s.replay(ctx, inf, tq, eh); err != nil {
				return err
			}
			continue
		}
		if err != nil {
			return err
		}
		if len(evs) == 0 {
			due, err := waitFeed(ctx, j, pos, tick, rs)
			if ctx.Err() != nil {
				return nil
			}
			if err != nil {
				return err
			}
			if due {
				rs = startResync(ctx, inf)
			}
			continue
		}
		for _, e := range evs {
			if ctx.Err() != nil {
				return nil
			}
			tq.SetOffset(e.Offset)
			if err := inf.dispatch(e, eh); err != nil {
				return err
			}
			pos = e.Offset
		}
		s.t.FedTo(pos)
	}
}

// commit commits p for the consumer, creating it on the first commit (see
// "Crash safety of a replay" at the top of the file); errConsumerResetting
// while the feed resets the consumer, or when p is from before the reset
// (exactconsumer.go).
func (s *ExactSource) commit(j *journal.Journal, name string, p uint64) error {
	do := func() error {
		return s.consumer.commit(func() bool { return p > s.t.Point() },
			func() error {
				err := j.Consumers().Create(name, p+1)
				if errors.Is(err, journal.ErrConsumerExists) {
					err = j.Consumers().Commit(name, p)
				}
				if err != nil {
					return err
				}
				return dropReplayHold(j, name)
			},
			func() error { return j.Consumers().Commit(name, p) })
	}
	var err error
	if h := s.ctl.hooks.commit; h != nil {
		err = h(p, do)
	} else {
		err = do()
	}
	if err == nil && s.ctl.sb != nil {
		s.tracker.NoteCommit(j, p)
	}
	return err
}

// waitFeed waits until the journal has an event after pos, tick fires
// (due: a resync is due), or the resync in progress, rs (nil: none), has
// an object ready; while one runs, tick is not waited for.
func waitFeed(ctx context.Context, j *journal.Journal, pos uint64, tick <-chan time.Time, rs *resyncRun) (due bool, err error) {
	var ready <-chan runtime.Object
	if rs != nil {
		if rs.pending() {
			return false, nil
		}
		ready, tick = rs.ready(), nil
		select {
		case o, ok := <-ready:
			rs.receive(o, ok)
			return false, nil
		default:
		}
	}
	if tick == nil && ready == nil {
		return false, j.Wait(ctx, pos)
	}
	wctx, cancel := context.WithCancel(ctx)
	waited := make(chan error, 1)
	go func() { waited <- j.Wait(wctx, pos) }()
	select {
	case err := <-waited:
		cancel()
		return false, err
	case <-tick:
		due = true
	case o, ok := <-ready:
		rs.receive(o, ok)
	}
	cancel()
	<-waited
	return due, nil
}

// replay sends a create event for every object of the file, each
// request recorded at offset 1 (the commit point stays 0 until all are
// reconciled), and returns the head the first chunk was read at: the feed
// goes on after it. The objects come through the handlers' replay
// pipeline (replaypipe.go: chunks bounded in objects and in bytes, decoded
// on all cores, in key order), and each waits for room below
// ExactOptions.MaxPending before it is handed to the handler, so a replay
// of any size holds at most MaxPending requests and a few chunks in
// memory. A chunk is current with its own head, at or after the first's:
// a key deleted after the first head has its DELETED after it; an object
// newer than the first head has its later events delivered too (at least
// once).
func (s *ExactSource) replay(ctx context.Context, inf *informer, tq *delivery.Queue, eh *exactHandler) (uint64, error) {
	if err := s.holdReplay(inf.f.j); err != nil {
		return 0, err
	}
	s.t.Reset(0)
	tq.SetOffset(1)
	var head uint64
	first, n, room := true, 0, 0
	reg := newRegistration(inf, nil, 0)
	err := reg.eachChunk(ctx, func(pctx context.Context, job *replayJob) error {
		if first {
			head, first = job.head, false
		}
		return job.objects(ctx, pctx, func(o runtime.Object) {
			if room == 0 {
				var ok bool
				if room, ok = s.t.WaitRoom(ctx, s.max); !ok {
					return // ctx done: objects returns without going on
				}
			}
			room--
			eh.OnAdd(o, true)
			n++
		})
	})
	if err != nil || ctx.Err() != nil {
		return 0, err
	}
	s.log.Info("replay queued every object", "objects", n, "head", head)
	s.t.FedTo(head)
	return head, nil
}

// replayHold is the name of the consumer that holds retention for the
// source whose consumer is name while it has none (see "Crash safety of
// a replay" at the top of the file).
func replayHold(name string) string { return "replaying:" + name }

// holdReplay registers the source's replay hold at j's head, before the
// replay reads its first chunk (at that head or later), moving one a
// crash or an earlier replay left.
func (s *ExactSource) holdReplay(j *journal.Journal) error {
	head, err := j.Head()
	if err != nil {
		return err
	}
	if h := s.ctl.hooks.beforeHold; h != nil {
		h(head)
	}
	hold := replayHold(s.Consumer())
	err = j.Consumers().Create(hold, head+1)
	switch {
	case errors.Is(err, journal.ErrConsumerExists):
		err = j.Consumers().Reset(hold, head)
	case errors.Is(err, journal.ErrTrimmed): // trimmed past head since: hold at the first retained event
		err = j.Consumers().Create(hold, 0)
	}
	return err
}

// dropReplayHold deletes the replay hold of consumer name, if there is one
// (a read first: a start with nothing to delete writes nothing).
func dropReplayHold(j *journal.Journal, name string) error {
	hold := replayHold(name)
	if _, err := j.Consumers().Committed(hold); errors.Is(err, journal.ErrNoConsumer) {
		return nil
	}
	return j.Consumers().Delete(hold)
}

// exactHandler turns informer callbacks into controller-runtime events,
// filters them with the predicates and calls the handler, as
// controller-runtime's own informer event handler
// (pkg/internal/source/event_handler.go) does for source.Kind.
type exactHandler struct {
	ctx  context.Context
	h    handler.EventHandler
	pred predicate.Predicate // the source's predicates, and-ed
	q    workqueue.TypedRateLimitingInterface[reconcile.Request]
	log  logr.Logger
}

var _ toolscache.ResourceEventHandler = (*exactHandler)(nil)

func (x *exactHandler) OnAdd(obj any, initial bool) {
	o, ok := obj.(client.Object)
	if !ok {
		x.log.Error(nil, "OnAdd missing Object", "type", fmt.Sprintf("%T", obj))
		return
	}
	e := event.CreateEvent{Object: o, IsInInitialList: initial}
	if x.pred.Create(e) {
		x.h.Create(x.ctx, e, x.q)
	}
}

func (x *exactHandler) OnUpdate(oldObj, newObj any) {
	o, ok1 := oldObj.(client.Object)
	n, ok2 := newObj.(client.Object)
	if !ok1 || !ok2 {
		x.log.Error(nil, "OnUpdate missing Object", "old", fmt.Sprintf("%T", oldObj), "new", fmt.Sprintf("%T", newObj))
		return
	}
	e := event.UpdateEvent{ObjectOld: o, ObjectNew: n}
	if x.pred.Update(e) {
		x.h.Update(x.ctx, e, x.q)
	}
}

func (x *exactHandler) OnDelete(obj any) {
	var e event.DeleteEvent
	if t, ok := obj.(toolscache.DeletedFinalStateUnknown); ok {
		e.DeleteStateUnknown = true
		obj = t.Obj
	}
	o, ok := obj.(client.Object)
	if !ok {
		x.log.Error(nil, "OnDelete missing Object", "type", fmt.Sprintf("%T", obj))
		return
	}
	e.Object = o
	if x.pred.Delete(e) {
		x.h.Delete(x.ctx, e, x.q)
	}
}
