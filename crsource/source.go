package crsource

// Source: a journal's events as reconcile.Requests on a controller's queue,
// committed as they reconcile.
//
// The name: controller-runtime calls this kind of thing a source (package
// sigs.k8s.io/controller-runtime/pkg/source), and operator code imports
// that package as source; crsource ("controller-runtime source") sits beside
// it without an import alias. The package owns the journal's writer (a
// watchjournal reconcile.Loop, run by Start), so operator code imports
// controller-runtime's reconcile package and never ours: no alias for the
// two packages named reconcile either.
//
// Delivery. Every journal event becomes a reconcile.Request for its key
// (namespace and name), added to the controller's queue: ADDED, MODIFIED,
// DELETED seen live and DELETED inferred by a relist (objects deleted while
// the process was down) alike. The queue merges requests for one key, as
// for source.Kind.
//
// Reasons. A request carries no event type, so the reconciler learns what
// happened by reading the object, as with source.Kind. What a DELETED's
// journal.Reason changes:
//
//   - gone, unconfirmed, or none: queued. The object is deleted (or may be):
//     the reconciler's Get answers NotFound.
//   - left-selector: queued, as source.Kind's informer queues the DELETED it
//     gets when an object leaves its label selector: the controller must
//     reconcile to notice the object left its scope. It is not a deletion:
//     the object still exists on the server, out of the selector. A
//     reconciler that reads through the journal (journal/cache) gets
//     NotFound; one that reads the server gets the object with its new
//     labels. For a controller whose scope is its selector, NotFound
//     means out of scope, and cleaning up what it made for the object is
//     right for gone and left-selector alike; one whose scope is the
//     object whatever its labels asks the server (the manager's
//     APIReader): NotFound there is a deletion, found is left-selector.
//     Cleanup that must precede the object's removal runs on
//     deletionTimestamp (finalizers), which an object leaving a selector
//     never has (docs/controller-runtime.md, "A delete is not always a
//     deletion").
//   - moved (package shards): not queued. The key moved to another
//     replica's range; that replica journals ADDED with reason moved and
//     reconciles it. Reconciling here too would race the new owner, and
//     the object was not deleted. The consumer's position moves past it.
//     An ADDED with reason moved is queued like any ADDED: this replica
//     owns the key now.
//
// Commit. The consumer's committed offset (journal.Consumer, named
// Options.Consumer) moves past an event only once a reconcile of its key
// that started after the event was queued completed: a nil error without
// Requeue, with or without RequeueAfter (see "Requeue timers"). An error
// or Requeue: true holds the commit back until a later reconcile of that
// key completes (controller-runtime retries both, rate-limited: the
// reconciler said it is not done); a reconcile.TerminalError counts as
// done (controller-runtime does not retry it either). The wrapper returned
// by Reconciler records these outcomes, and it is required (ErrNotWrapped
// says what happens without it). After a crash or a
// restart, the events after the committed offset are delivered again (at
// least once) and nothing before it is: a restart reconciles what changed,
// not every object.
//
// Requeue timers. (Result{RequeueAfter: d}, nil) is, as controller-runtime
// reads it, "done, look again in d": it completes the request's events, so
// a key that always asks to be looked at again (a periodic check) never
// pins the commit. The timer is kept durably instead: the wrapper records
// key → due time, and the committer writes them to a file beside the
// journal (TimersPath: the journal's path, the consumer's name, ".timers";
// replaced whole, atomically) before each commit, so every commit that
// passes such an event has its timer on disk (a due time a later reconcile
// moved without a commit is written within 10 s; unwritten, the timer
// fires earlier after a restart, never later). Start re-arms each stored
// timer on the controller's queue (AddAfter(due - now), at once when due):
// a restart with nothing changed reconciles the keys whose timers are due,
// and nothing else. A completion without RequeueAfter clears the key's
// timer; an error or Requeue leaves it.
//
// Bounds. At most Options.MaxPending events are queued and not yet
// reconciled (MaxPending says how). A consumer that retention's hard byte
// cap passed (its events are gone) is resynchronized as an informer
// restarts (resync says how).

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"

	"github.com/watchjournal/watchjournal/internal/delivery"
	"github.com/watchjournal/watchjournal/journal"
	wjreconcile "github.com/watchjournal/watchjournal/reconcile"
)

// LoopOptions configure the journal's writer (watchjournal's
// reconcile.Options: page size, timeouts, backoff, logger). An alias, so
// that operator code needs no import of watchjournal's reconcile package.
type LoopOptions = wjreconcile.Options

// DefaultConsumer is the consumer name used when Options.Consumer is empty.
const DefaultConsumer = "controller"

// DefaultMaxPending is the default Options.MaxPending.
const DefaultMaxPending = 10000

// ErrNotWrapped is returned by WaitForSync, and so by the controller's and
// the manager's Start, when Source.Reconciler was never called: the
// controller was given its reconciler unwrapped (Complete(r) where
// Complete(src.Reconciler(r)) is needed). Unwrapped, no reconcile's
// outcome reaches the source: nothing is ever committed, and once
// MaxPending requests are outstanding no more arrive.
var ErrNotWrapped = errors.New("crsource: the controller's reconciler is not wrapped by Source.Reconciler: " +
	"build the controller with Complete(src.Reconciler(r)), not Complete(r); " +
	"unwrapped, nothing is committed and requests stop after MaxPending")

// Options configure New. Path and Resource are required.
type Options struct {
	// Path is the journal file, created (mode 0600) when missing.
	Path string
	// Resource is what the journal watches (journal.Resource: GVR,
	// namespace, selectors). An existing file must record the same one,
	// but for its label and field selectors: when only those changed, the
	// file takes the new ones (journal.Options.MigrateSelectors) and the
	// start relists; keys that left the selectors arrive as DELETED with
	// reason left-selector, keys that came in as ADDED.
	Resource journal.Resource
	// Consumer names the durable consumer whose committed offset is the
	// controller's position. Default DefaultConsumer. Two controllers on
	// one file need two names.
	Consumer string
	// Loop configures the writer. Zero fields take its defaults.
	Loop LoopOptions
	// Batch is how many events one read takes at most; 0 means
	// journal.DefaultBatch.
	Batch int
	// MaxPending bounds the events queued and not yet reconciled, which the
	// source tracks in memory (a few dozen bytes each): the feeder reads no
	// more than the room it leaves and waits when it is reached (a resync
	// after retention passed the consumer queues the index's keys the same
	// way, MaxPending at a time), and WaitForSync returns once it is
	// reached. Default DefaultMaxPending.
	MaxPending int
	// Retention bounds the journal of a source made by New: a compactor
	// runs beside the writer (retention.go). Nil means DefaultRetention
	// (64 MiB of events beyond the consumer's commit); a pointer to the
	// zero journal.Retention runs none. Ignored by NewFromConsumer.
	Retention *journal.Retention
	// FailingBound is how long the writer may meet only errors (in
	// backoff, Status.LastError set) before ReadyzCheck reports the source
	// not ready (health.go). Default reconcile.DefaultFailingBound.
	FailingBound time.Duration
	// NoSync skips fsync on commit: for tests only.
	NoSync bool
	// Standby, when set, makes the source a warm standby under leader
	// election (standby.go, at the top):
	// call AddToManager, and the leader publishes its position on a Lease
	// from which the next leader starts. Nil: the controller starts from
	// this replica's own committed offset.
	Standby *Standby
}

// Source is a source.TypedSyncingSource[reconcile.Request] over a journal.
// Create it with New (it owns the journal and its writer) or
// NewFromConsumer (the caller runs the writer); give it to a controller
// with WatchesRawSource, and wrap the controller's Reconciler with
// Reconciler. It can be started once.
type Source struct {
	j           *journal.Journal
	c           *journal.Consumer
	loop        *wjreconcile.Loop // nil for NewFromConsumer
	retention   journal.Retention // run by Start when retains (retention.go)
	retains     bool
	failing     time.Duration // Options.FailingBound
	waitForSync func(context.Context) error
	batch, max  int
	t           *delivery.Tracker
	out         *delivery.Outcomes // the wrapper's reports, the requeue timers
	timersErr   error              // the timers file could not be read: Start fails
	log         logr.Logger
	sb          *standby // nil without Options.Standby
	resyncFirst bool     // the feeder resyncs before its first read (standby.go)

	mu      sync.Mutex
	started bool
	err     error
	done    chan struct{}
	synced  chan struct{} // closed when the writer has synced; never for a fatal error
	failed  chan struct{} // closed when the writer stopped with an error
	users   int           // running users of the journal (standby.go, acquire)
	closed  bool          // the last user released it, or Close closed it

	// writerClaimed is set once the writer was started (by Start or the
	// writer Runnable): the first to set it runs it.
	writerClaimed atomic.Bool
}

var _ source.TypedSyncingSource[reconcile.Request] = (*Source)(nil)

// New opens (or creates) the journal at opts.Path for opts.Resource, and
// prepares its writer and the named consumer. Nothing runs until Start
// (or, with AddToManager, the manager's Start); the file is locked from
// New on (an error matching journal.ErrLocked if another process holds
// it: two replicas cannot share a file, see standby.go, at the top) and
// released when the source and its writer stop, or by Close if neither is
// ever started.
func New(cfg *rest.Config, opts Options) (*Source, error) {
	if opts.Path == "" {
		return nil, errors.New("crsource: Options.Path is empty")
	}
	res := opts.Resource
	// A changed selector migrates (journal/migrate.go): the start relists,
	// and keys that left it are delivered as DELETED, reason left-selector.
	j, err := journal.Open(opts.Path, &journal.Options{Resource: &res, MigrateSelectors: true, NoSync: opts.NoSync, Logger: opts.Loop.Logger})
	if err != nil {
		return nil, fmt.Errorf("crsource: %w", err)
	}
	loop, err := wjreconcile.New(cfg, j, opts.Loop)
	if err != nil {
		_ = j.Close()
		return nil, fmt.Errorf("crsource: %w", err)
	}
	name := cmp.Or(opts.Consumer, DefaultConsumer)
	c, err := j.Consumers().Open(name)
	if err != nil {
		_ = j.Close()
		return nil, fmt.Errorf("crsource: %w", err)
	}
	s := newSource(c, nil, opts)
	s.loop = loop
	if opts.Standby != nil {
		if s.sb, err = newStandby(cfg, s, opts); err != nil {
			_ = j.Close()
			return nil, err
		}
	}
	s.retention, s.retains = retention(opts)
	s.failing = opts.FailingBound
	// Synced only once the journal is known current with the server
	// (reconcile.Loop.HasSynced): never before a restart's relist.
	s.waitForSync = loop.WaitForSync
	return s, nil
}

// NewFromConsumer returns a Source that feeds c's events and commits c, for
// a program that runs the journal's writer itself. waitForSync blocks until
// that writer is synced with the server (for a watchjournal Loop, its
// WaitForSync method) or ctx is done; nil means the journal counts as
// synced from the start. The caller keeps the journal open while the source
// runs and closes it after Done.
func NewFromConsumer(c *journal.Consumer, waitForSync func(ctx context.Context) error, opts Options) *Source {
	return newSource(c, waitForSync, opts)
}

// TimersPath is the file beside the journal at path that holds the
// RequeueAfter timers of its consumer ("Requeue timers", above).
func TimersPath(path, consumer string) string {
	return path + "." + url.PathEscape(consumer) + ".timers"
}

func newSource(c *journal.Consumer, waitForSync func(context.Context) error, opts Options) *Source {
	if opts.MaxPending <= 0 {
		opts.MaxPending = DefaultMaxPending
	}
	log := opts.Loop.Logger
	start := c.Position()
	if start > 0 {
		start--
	}
	// A timers file that cannot be read fails Start (timersErr).
	timers, timersErr := delivery.LoadTimers(TimersPath(c.Journal().Path(), c.Name()))
	if timersErr != nil {
		timersErr = fmt.Errorf("crsource: %w", timersErr)
	}
	t := delivery.NewTracker(start)
	out := delivery.NewOutcomes(timers)
	out.AddTracker(t)
	return &Source{j: c.Journal(), c: c, waitForSync: waitForSync, batch: opts.Batch, max: opts.MaxPending,
		t: t, out: out, timersErr: timersErr, log: log.WithValues("consumer", c.Name()),
		done: make(chan struct{}), synced: make(chan struct{}), failed: make(chan struct{})}
}

// Journal returns the journal the source reads.
func (s *Source) Journal() *journal.Journal { return s.j }

// Loop returns the journal's writer, the list/watch loop the source runs
// (nil for a source made by NewFromConsumer): for metrics.Register,
// inspect.Serve and its Status.
func (s *Source) Loop() *wjreconcile.Loop { return s.loop }

// String names the source in controller-runtime's logs.
func (s *Source) String() string { return "watchjournal " + s.j.Path() + " consumer " + s.c.Name() }

// Start starts the writer (for New), the feeder that turns events into
// requests on q, and the committer, and returns at once. They stop when ctx
// is done; then the journal closes (for New) and Done is closed.
func (s *Source) Start(ctx context.Context, q workqueue.TypedRateLimitingInterface[reconcile.Request]) error {
	s.mu.Lock()
	err := s.timersErr
	switch {
	case s.started:
		err = errors.New("crsource: source already started")
	case s.sb != nil && !s.sb.Added():
		err = ErrStandbyNotAdded
	}
	if err == nil {
		s.started = true
	}
	s.mu.Unlock()
	if err != nil {
		return err
	}
	if !s.acquire() {
		return errors.New("crsource: the journal is closed")
	}

	ctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	if s.loop != nil && s.writerClaimed.CompareAndSwap(false, true) {
		wg.Go(func() {
			if err := s.runWriter(ctx); err != nil {
				s.fail(err)
				cancel()
			}
		})
	}
	go func() { // exits when waitForSync returns
		if s.waitForSync == nil || s.waitForSync(ctx) == nil {
			close(s.synced)
		}
	}()
	// The RequeueAfter timers of the last run ("Requeue timers", above).
	s.out.Timers().Rearm(time.Now(), q.AddAfter)
	wg.Go(func() {
		if err := s.feed(ctx, q); err != nil {
			s.fail(err)
			cancel()
		}
	})
	wg.Go(func() { s.commitLoop(ctx) })
	go func() {
		wg.Wait()
		cancel()
		if s.sb != nil {
			close(s.sb.stopped)
		}
		s.release()
	}()
	return nil
}

// WaitForSync blocks until the writer is synced and every event journaled
// up to then is queued, as an informer's HasSynced implies its initial
// items were handed to the handlers (or MaxPending requests are queued
// and not yet reconciled: the workers, which start after WaitForSync,
// must make room for the rest); until ctx is done (ctx.Err()); or until
// the source fails (Err).
//
// It returns ErrNotWrapped at once, and logs it, when Reconciler has not
// been called: a controller calls WaitForSync before it starts its
// workers, after its builder took the reconciler, so a controller given
// an unwrapped reconciler fails to start instead of stalling. A program
// that drives the queue itself calls Reconciler before WaitForSync.
func (s *Source) WaitForSync(ctx context.Context) error {
	if !s.out.Wrapped() {
		s.log.Error(ErrNotWrapped, "controller not started", "source", s.String())
		return ErrNotWrapped
	}
	select { // the writer first: it does not wait for the workers
	case <-s.synced:
	case <-s.failed:
		return s.Err()
	case <-ctx.Done():
		return ctx.Err()
	}
	return s.t.WaitSynced(ctx, s.synced, func() (uint64, error) {
		head, err := s.j.Head()
		if err != nil {
			return 0, fmt.Errorf("crsource: %w", err)
		}
		return head, nil
	}, s.failed, s.Err)
}

// Reconciler wraps r so that the source learns each reconcile's outcome:
// a success (nil error, no Requeue), a success with RequeueAfter (its
// timer is kept durably: "Requeue timers", above) or a TerminalError
// lets the commit move past the request's events queued before the
// reconcile began. Pass the wrapper to the controller (Complete, Build):
// it is required, and WaitForSync returns ErrNotWrapped until Reconciler
// has been called.
func (s *Source) Reconciler(r reconcile.Reconciler) reconcile.Reconciler { return s.out.Wrap(r) }

// Committed returns the consumer's committed offset.
func (s *Source) Committed() (uint64, error) { return s.c.Committed() }

// Done is closed once the source has stopped after its context ended (and,
// for New, the journal is closed and its file lock released: with
// AddToManager, once the writer Runnable has stopped too; on a replica
// that never led, when the writer Runnable stops).
func (s *Source) Done() <-chan struct{} { return s.done }

// Err returns why the source stopped early: the writer's fatal error
// (reconcile.ErrJournal, ErrRejected) or a journal read error. It is nil
// while running and after a clean shutdown, which is not an error (as for
// controller-runtime's Start and reconcile.Loop.Run).
func (s *Source) Err() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.err
}

// Close closes the journal of a source made by New that was never started.
// A started source closes it itself when its context ends.
func (s *Source) Close() error {
	s.mu.Lock()
	if s.started || s.loop == nil || s.users > 0 || s.closed {
		s.mu.Unlock()
		return nil
	}
	s.closed = true
	s.mu.Unlock()
	return s.j.Close()
}

func (s *Source) fail(err error) {
	s.mu.Lock()
	if s.err == nil {
		s.err = err
		close(s.failed)
	}
	s.mu.Unlock()
	s.log.Error(err, "source stopped")
}

// feed reads the consumer and queues a request per event, but a DELETED
// whose reason is moved. It reads at most the room MaxPending leaves, so
// the requests tracked never exceed it.
func (s *Source) feed(ctx context.Context, q workqueue.TypedRateLimitingInterface[reconcile.Request]) error {
	batch := s.batch
	if batch <= 0 {
		batch = journal.DefaultBatch
	}
	if s.sb != nil {
		if err := s.standbyStart(ctx); err != nil {
			return err
		}
		if s.resyncFirst {
			if err := s.resync(ctx, q); err != nil {
				return err
			}
			s.resyncFirst = false
		}
	}
	for {
		room, ok := s.t.WaitRoom(ctx, s.max) // MaxPending
		if !ok {
			return nil
		}
		evs, err := s.c.Next(ctx, min(batch, room))
		if ctx.Err() != nil {
			return nil
		}
		if errors.Is(err, journal.ErrTrimmed) {
			if err := s.resync(ctx, q); err != nil {
				return err
			}
			continue
		}
		if err != nil {
			return fmt.Errorf("crsource: read: %w", err)
		}
		for _, e := range evs {
			if e.Type == journal.Deleted && e.Reason == journal.ReasonMoved {
				// Another replica owns the key now and reconciles it
				// ("Reasons", above): nothing to queue, nothing to wait for.
				continue
			}
			req := request(e.Key)
			s.t.Add(e.Offset, req)
			q.Add(req)
		}
		s.t.FedTo(evs[len(evs)-1].Offset)
	}
}

// resync handles a consumer that retention has passed (the hard byte cap
// overrides a consumer's hold): the events in between are gone, so every
// key the index holds is queued, as after an informer's restart, and the
// feed goes on after the head read before the first key. Deletes among the
// trimmed events are not seen.
//
// The keys are queued a page at a time, each page no larger than the room
// MaxPending leaves, so a million keys are never all tracked and queued at
// once. The index is read in pages (Journal.ScanIndex), not in one
// snapshot: a key present at head is either on its page or was deleted
// after head, and then the DELETED after head queues it; a key created
// after head may be queued twice (on its page and by its ADDED), which the
// queue merges or the reconciler sees twice (at least once). The tracker
// starts over (the keys supersede its entries), and each key's entry is
// at offset 1: the commit stays where it was, below the trimmed events,
// until every key is reconciled, so a crash during the resync resyncs
// again rather than skipping the keys not yet reconciled.
func (s *Source) resync(ctx context.Context, q workqueue.TypedRateLimitingInterface[reconcile.Request]) error {
	head, err := s.j.Head()
	if err != nil {
		return fmt.Errorf("crsource: resync: %w", err)
	}
	if !s.resyncFirst { // else standbyStart said why
		s.log.Info("retention trimmed events this consumer had not committed; queueing every key, MaxPending at a time", "head", head)
	}
	s.t.Reset(0)
	after, keys := "", 0
	for {
		room, ok := s.t.WaitRoom(ctx, s.max) // MaxPending
		if !ok {
			return nil
		}
		page, err := s.j.ScanIndex(after, room)
		if err != nil {
			return fmt.Errorf("crsource: resync: %w", err)
		}
		for _, e := range page {
			r := request(e.Key)
			s.t.Add(1, r)
			q.Add(r)
		}
		keys += len(page)
		if len(page) < room {
			break
		}
		after = page[len(page)-1].Key
	}
	s.log.Info("resync queued every key", "keys", keys, "head", head)
	s.c.Seek(head + 1)
	s.t.FedTo(head)
	return nil
}

// commitLoop commits the tracker's point whenever it moves, coalescing
// bursts into one write, the requeue timers saved first, and once more at
// shutdown.
func (s *Source) commitLoop(ctx context.Context) {
	committed, _ := s.c.Committed()
	delivery.CommitLoop(ctx, s.t, committed, s.out.Timers(),
		func(p uint64) error {
			if err := s.j.Consumers().Commit(s.c.Name(), p); err != nil {
				return err
			}
			if s.sb != nil {
				// The position moves to what p covers
				// (position.Tracker.At), never back.
				s.sb.tracker.NoteCommit(s.j, p)
			}
			return nil
		},
		func(err error) bool { return errors.Is(err, journal.ErrClosed) }, s.log, true)
}

// request turns a journal key (<namespace>/<name>, or <name>) into a
// reconcile.Request.
func request(key string) reconcile.Request {
	ns, name, ok := strings.Cut(key, "/")
	if !ok {
		return reconcile.Request{NamespacedName: types.NamespacedName{Name: key}}
	}
	return reconcile.Request{NamespacedName: types.NamespacedName{Namespace: ns, Name: name}}
}
