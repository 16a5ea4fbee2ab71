package reconcile

// Server signals.
//
// The delay the server asks for is a floor under the backoff
// (Options.MinBackoff). A watch the server refuses for any reason but a
// gone resourceVersion is retried as a watch, from the same
// resourceVersion, however often (backoffWait says why). The one refusal
// that relists besides 410 is the apiserver's 500 "etcd event received
// with PrevKv=nil" (compactedRevisionMessage in errors.go), recognised by
// its message and logged at info (V(0)), as a 410 is. Throttling (429) is
// logged as such, at info. The backoff resets, and Status.LastError
// clears, on each success Status.LastError names (watchSettle).
//
// Logs.
//
// Options.Logger says what is logged at which level; a failure's kind,
// logged once, is failureKey's (phase, HTTP code and reason, or network
// operation). Keys are field words: resource, resourceVersion, offset,
// origin, delay.

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"math"
	"sync"
	"time"

	"github.com/go-logr/logr"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/rest"
	"k8s.io/utils/clock"

	"github.com/watchjournal/watchjournal/internal/hashrange"
	"github.com/watchjournal/watchjournal/journal"
)

// Options configure a Loop. Zero fields take the defaults given.
type Options struct {
	// PageSize is the list limit per page, in objects. Default 500, as
	// client-go's reflector and kube-rs's watcher.
	PageSize int64
	// WatchTimeout is the timeoutSeconds asked of each watch; the server
	// ends the watch after it and the loop resumes from the last
	// resourceVersion. Default 5 minutes, plus up to 100% jitter. The
	// rest.Config's Timeout does not cut a watch (see New).
	WatchTimeout time.Duration
	// IdleTimeout is how long a watch may deliver nothing (no event, no
	// bookmark) before the loop replaces it with a new watch from the same
	// resourceVersion, on a new connection. It bounds how long a stalled
	// connection (open, but passing no bytes) goes unnoticed; on a quiet
	// resource it costs one watch request per IdleTimeout. Default 2
	// minutes; the apiserver's bookmarks (watch cache on) keep a healthy
	// watch from idling.
	IdleTimeout time.Duration
	// VerifyInterval is how often, in wall-clock time across watches, the
	// loop verifies a healthy watch (anti-entropy, verify.go): it lists
	// metadata at exactly the resourceVersion the journal applied and diffs
	// the list against the index, so an event the watch lost
	// (kubernetes/kubernetes#123072) shows up as a divergence
	// (Status.Divergences) and is journaled with origin relist; events
	// still on their way never count. Each interval is jittered to
	// [0.8, 1.2) × VerifyInterval. Zero: DefaultVerifyInterval (10
	// minutes). Negative: no periodic verify (Verify and 410s still
	// relist). Either way one verify runs soon after a restart that
	// resumed from the stored resourceVersion, once it synced.
	VerifyInterval time.Duration
	// RequestTimeout bounds the time to first byte of each request: a list
	// page (and a watch) must begin its response (status and headers)
	// within it, or the request is abandoned (ErrNoResponse). It does not
	// bound the body: a page of large objects on a slow link takes as long
	// as its bytes take, as long as they keep coming (ProgressTimeout).
	// Default 60 s.
	// A rest.Config Timeout, when the caller sets one, bounds each list
	// request whole (as http.Client.Timeout), never a watch.
	RequestTimeout time.Duration
	// ProgressTimeout bounds a gap in a list response's body: a read that
	// waits this long without a byte abandons the page (ErrNoProgress);
	// time the loop spends between reads does not count. A page whose body breaks
	// (a gap, a cut, an early end) is requested again from the same point;
	// one that keeps breaking halves the page size, down to one object,
	// for this list and the loop's later ones (logged at V(0)). Default
	// 30 s.
	ProgressTimeout time.Duration
	// BatchLimit is the most watch events committed in one transaction
	// (group commit). Default 1000.
	BatchLimit int
	// MinBackoff and MaxBackoff bound the jittered exponential backoff
	// between failed attempts. Defaults 200 ms and 30 s. When the server
	// asks for a delay (Retry-After on a 429 or 503, or a Status's
	// details.retryAfterSeconds: apierrors.SuggestsClientDelay), the wait is
	// at least that long, whatever these say: the server's delay is a floor
	// under the jittered backoff, for lists and watches alike.
	MinBackoff, MaxBackoff time.Duration
	// SecretPayloads is the explicit opt-in to journal the data of Secrets
	// (core/v1 secrets). Without it New refuses a journal of Secrets whose
	// Resource is not MetadataOnly: a Secret's data never reaches the disk
	// by default. With it, the journal must seal them (opened with a
	// journal.Options.Keyring: the data is stored encrypted, journal/seal.go);
	// New refuses a journal without a keyring (ErrSecretPayloads), as it
	// refuses one of any other sensitive resource (journal.Options.SealResources).
	SecretPayloads bool
	// ListMode chooses how the loop lists. Zero: a streaming list (one
	// watch request with sendInitialEvents, KEP-3157) where the server
	// serves it, pages where it refuses (listmode.go);
	// ListModePaginated: always pages. ListModeStreaming means the same as
	// zero: a server that refuses streaming lists still gets pages.
	ListMode ListMode
	// StreamingRetry is how long after a server refused a streaming list
	// the loop lists in pages before it tries a streaming list again; the
	// refusal is remembered in the journal file across restarts. Zero:
	// DefaultStreamingRetry (1 hour).
	StreamingRetry time.Duration
	// Wire chooses the encoding of watches and streaming lists. Zero
	// (WireAuto): protobuf for the built-in kinds of client-go's scheme,
	// as client-go's typed informers ask for it, stored as sent (the
	// Kubernetes protobuf envelope), and JSON for the rest (wire.go says
	// what is stored for which kind, and what it costs: decoders drop
	// fields this build's types do not know). WireJSON: JSON always, on
	// the wire and on disk, every field as served.
	Wire Wire
	// Compression asks the apiserver to gzip its responses
	// (Accept-Encoding: gzip). Default false: no compression, as
	// kube-controller-manager and kube-scheduler run
	// (rest.Config.DisableCompression, kubernetes/kubernetes#80919 and
	// #112296): on a local or in-cluster link gzip costs the apiserver
	// more CPU than the bytes save time (BENCHMARKS.md). Set it over a
	// slow or metered link (a remote cluster through a VPN). A cfg with
	// DisableCompression set is never compressed.
	Compression bool
	// Logger receives one line per state change and per error: errors
	// through Error (a failure, logged once per kind until the loop
	// succeeds), state changes at V(0), repeats of a failure at V(1). Each
	// line carries the key "resource". The zero Logger discards; client-go,
	// klog and controller-runtime speak logr, so their sinks (zapr, klogr,
	// controller-runtime's log.Log) take it as is.
	Logger logr.Logger
	// Clock drives backoff waits; tests may pass a fake. Default real time.
	Clock clock.WithTicker
	// Transform, when set, is called with every object before it is
	// stored, and its result is stored instead (transform.go): the objects
	// of watch events (a DELETED's last object too), of list and relist
	// pages and of streaming lists, so what it removes never reaches the
	// file. obj is as Item.Object describes it (JSON, or a built-in
	// kind's protobuf envelope); the result may be either encoding, and
	// must keep the object's name, namespace, UID and resourceVersion. A
	// result that changes them, or an error it returns, is ErrTransform:
	// the object is not stored and the request is retried with backoff,
	// as an undecodable one. Calls may overlap. Nil: objects are stored
	// as served.
	Transform func(obj []byte) ([]byte, error)
	// Inherited is what the previous owners of the journal's pending shard
	// range held (package shards sets it when a dead member's range is
	// taken over; shard.go): the first list that commits turns their
	// index into the listed state with exact events. The loop keeps it in
	// memory for its life. Nil: none.
	Inherited *Inheritance
}

func (o Options) withDefaults() Options {
	o.PageSize = positive(o.PageSize, 500)
	o.WatchTimeout = positive(o.WatchTimeout, 5*time.Minute)
	o.IdleTimeout = positive(o.IdleTimeout, 2*time.Minute)
	o.RequestTimeout = positive(o.RequestTimeout, 60*time.Second)
	o.ProgressTimeout = positive(o.ProgressTimeout, 30*time.Second)
	o.BatchLimit = positive(o.BatchLimit, 1000)
	o.VerifyInterval = cmp.Or(o.VerifyInterval, DefaultVerifyInterval) // negative: off
	o.MinBackoff = positive(o.MinBackoff, 200*time.Millisecond)
	o.MaxBackoff = positive(o.MaxBackoff, 30*time.Second)
	o.StreamingRetry = positive(o.StreamingRetry, DefaultStreamingRetry)
	if o.Clock == nil {
		o.Clock = clock.RealClock{}
	}
	return o
}

// positive returns v when it is above zero, def otherwise: an Options
// field that is zero or negative takes its default.
func positive[T int | int64 | time.Duration](v, def T) T {
	if v > 0 {
		return v
	}
	return def
}

// watchSettle is how long a watch must stay open, after the server
// answered it with 200, without an error before it counts as healthy: the
// backoff resets and Status.LastError clears then, even on a quiet resource
// that sends no frame. An apiserver refuses a watch's resourceVersion at
// once (an ERROR frame right after the 200), well within it.
const watchSettle = time.Second

// Status is a snapshot of a Loop.
type Status struct {
	// Phase is the current state.
	Phase Phase
	// ResourceVersion is the last resourceVersion fully applied.
	ResourceVersion string
	// Synced is true once the journal is known current with the server:
	// after a complete list, or after a watch resumed from the stored
	// resourceVersion proved it served; never while a 410 awaits the
	// resume (synced.go). Once true it stays true. See HasSynced.
	Synced bool
	// SyncedOffset is the journal's head offset when Synced turned true
	// (0 for an empty journal): a consumer past it has caught up with the
	// server's state as of the sync.
	SyncedOffset uint64
	// SyncedBy names what proved Synced (synced.go): "list" (a complete
	// list committed), "current" (the stored resourceVersion was the
	// server's current one), "caught up" (a resumed watch's events or
	// bookmarks reached the server's resourceVersion), "served" (the
	// server ended a resumed watch normally, with no 410); empty until
	// Synced.
	SyncedBy string
	// LastError is the error that caused the last backoff, nil after a
	// success: a completed list, an applied watch frame, or a watch open
	// (answered 200) for a second without an error, so a healthy resume on
	// a quiet resource clears it. Match it with errors.Is (ErrList,
	// ErrWatchStart, ErrWatch, ErrDecode) and with apierrors.IsForbidden /
	// IsNotFound / IsTooManyRequests for the cause.
	LastError error
	// FailingSince is when the current run of failures began: the time
	// (Options.Clock) LastError was set after a success; zero while
	// LastError is nil. Ready uses it to tell a loop stuck in backoff.
	FailingSince time.Time
	// Lists counts completed lists (initial and relists); Watches counts
	// watch requests that opened; Gone counts 410s seen, in any shape,
	// and the 500 "PrevKv=nil" of a watch from just below etcd's
	// compaction revision, which means the same;
	// ListRestarts counts lists started again after an expired continue;
	// IdleRestarts counts watches replaced after IdleTimeout.
	Lists, Watches, Gone, ListRestarts, IdleRestarts int
	// Backoffs counts waits after a failure (any phase); Throttled counts
	// those the server asked for (429, or a Retry-After it sent).
	Backoffs, Throttled int
	// Events counts events this loop appended to the journal.
	Events int
	// Verifies counts anti-entropy relists (Verify, VerifyInterval, and
	// the one after a restart that resumed: verify.go);
	// Divergences counts the events they found that the watch had lost
	// (verify.go says how a difference is told from an event in flight).
	Verifies, Divergences int
	// Rewinds counts the times the server's current resourceVersion
	// compared below the stored one (etcd restored from an older backup),
	// each followed by a relist (probe.go).
	Rewinds int
	// Replays counts watches the server replayed from scratch, ignoring
	// the resourceVersion of the resume (every object as ADDED), each
	// followed by a relist (replay.go).
	Replays int
	// ListMode is how the loop lists now: ListModeStreaming or
	// ListModePaginated; ListModeReason says why: "not tried yet", "the
	// apiserver serves streaming lists", "Options.ListMode", or the
	// server's refusal of a streaming list (listmode.go).
	ListMode       ListMode
	ListModeReason string
	// Encoding is the encoding of the last watch or streaming list's
	// response: "protobuf" or "json" (Options.Wire, wire.go); empty
	// before the first.
	Encoding string
	// LastVerifyFirst and LastVerifyLast are the offsets the last verify
	// journaled, inclusive; both 0 when it found nothing.
	LastVerifyFirst, LastVerifyLast uint64
	// ShardMode says how a journal bound to a shard range keeps to it:
	// ShardServer (the apiserver filters), ShardClient (the loop does),
	// ShardUnknown before the first list or watch; ShardNone unsharded
	// (shard.go).
	ShardMode ShardMode
	// Counters by cause, list progress and commit latency (see
	// Counters), read as Status fields: ListsInitial, BackoffsByReason,
	// Journaled.Watch.Added, CommitLatency, ….
	Counters
}

// Loop keeps one journal in step with one resource. Create it with New and
// run it with Run; it is the journal's only writer.
type Loop struct {
	j    *journal.Journal
	w    *journal.Writer // j's write side: the loop is the file's writer
	c    *client
	opts Options
	log  logr.Logger

	mu      sync.Mutex
	status  Status
	changed chan struct{} // closed and replaced on every status change

	verify chan struct{} // Verify's request, buffered 1
	// pending is the journal's pending shard ranges as of the current
	// list's start: its ADDED there moved in (shard.go).
	pending hashrange.Set
	// inherit is Options.Inherited while no list has committed since the
	// loop began at an empty resourceVersion (shard.go); nil otherwise.
	inherit *inheritState
	// fullPages is set once the server answered a metadata-only list with
	// full objects (or 406): relists then read full pages.
	fullPages bool
	// pageSize is the list page size: Options.PageSize, less once pages
	// kept breaking mid-body (pageBroke).
	pageSize int64

	// verifyAt is the next periodic verify's deadline (verify.go); zero
	// until the first watch schedules it.
	verifyAt time.Time
	// runErr is Run's error once it returned (under mu).
	runErr error

	// refusedAt is when the server last refused a streaming list
	// (listmode.go).
	refusedAt time.Time

	// kindRetry is set when New could not record the kind: Run retries
	// it (kind.go).
	kindRetry *kindRetry
	// restartVerify is set when Run resumed from a stored resourceVersion:
	// a verify runs once the resume is proven (verify.go).
	restartVerify bool

	backoff    *wait.Backoff // current backoff; nil after a success
	staging    TypeCounts    // events staged by the current list (counters.go)
	lastLogged string        // failureKey of the last failure logged at V(0) or Error
}

// New returns a Loop that keeps j in step with the resource j records, read
// through the apiserver at cfg. The resource must be recorded (journal.Open
// with Options.Resource); otherwise New fails. New asks discovery once
// for the resource's kind (kind.go): a resource that discovery answers
// without, in a file never written from a served resource, is an
// *UnknownResourceError (ErrUnknownResource), not a Loop that retries a 404;
// other errors from New are ErrInvalidSelector and ErrSecretPayloads.
//
// What New takes from cfg, and what it changes:
//   - cfg.Timeout bounds each request that is not a watch (it is the list
//     requests' http.Client.Timeout). A watch is never cut by it: a watch
//     lives for its timeoutSeconds (Options.WatchTimeout), and a stalled one
//     is found by Options.IdleTimeout.
//   - Content type: protobuf for watches and streaming lists of built-in
//     kinds, as Options.Wire says; list pages (paginated lists, lookups,
//     verifies) and custom resources are JSON (wire.go).
//   - Compression: none unless Options.Compression (set on the loop's copy
//     of cfg).
//   - HTTP/1.1, unless cfg sets a Transport or NextProtos: each watch then
//     holds its own TCP connection, so replacing a stalled watch
//     (IdleTimeout) closes its connection, and the next request dials a new
//     one. Over HTTP/2 every request shares one connection: a replaced watch
//     resets only its stream, and the next request queues on the same
//     possibly dead connection until client-go's HTTP/2 health check (a ping
//     after 30 s without a frame, 15 s to answer) closes it, so a dead link
//     goes unnoticed for up to 45 s more, and a relist's pages share the
//     connection's flow-control window with the watch. The loop makes a few
//     requests at a time (a watch, or a list and its next page), so one
//     connection per request costs it a few handshakes, which make small
//     lists slower than over HTTP/2 (BENCHMARKS.md): the price of finding
//     a dead link within IdleTimeout rather than up to 45 s later. A caller who wants HTTP/2 sets
//     cfg.NextProtos = []string{"h2", "http/1.1"} (or its own Transport):
//     the loop is correct either way, as the health check bounds how long a
//     dead connection lives.
//
// How it lists (listmode.go, stream.go): a streaming list (KEP-3157, a
// watch with sendInitialEvents=true from the watch cache, or etcd when the
// cache is off) where the server serves it, for the first list and for
// relists after a 410: one request whose connection goes on as the watch,
// and no etcd read per page; it moves every object in full, once. A server
// that refuses streaming lists (400/405/406/422: the WatchList feature
// gate off, an aggregated API) is answered with paginated lists, chosen
// per file and retried after Options.StreamingRetry: Status.ListMode says
// which runs and why. A paginated first list reads each page once, in
// full; a paginated relist reads metadata pages, and pages in full only
// where something changed. Options.ListMode = ListModePaginated never
// streams.
func New(cfg *rest.Config, j *journal.Journal, opts Options) (*Loop, error) {
	res, ok, err := j.Resource()
	if err != nil {
		return nil, fmt.Errorf("reconcile: %w", err)
	}
	if !ok {
		return nil, errors.New("reconcile: journal records no resource: open it with journal.Options.Resource")
	}
	if _, err := labels.Parse(res.LabelSelector); err != nil {
		return nil, fmt.Errorf("%w: label selector %q: %v", ErrInvalidSelector, res.LabelSelector, err)
	}
	if _, err := fields.ParseSelector(res.FieldSelector); err != nil {
		return nil, fmt.Errorf("%w: field selector %q: %v", ErrInvalidSelector, res.FieldSelector, err)
	}
	opts = opts.withDefaults()
	if err := checkSealing(j, res, opts); err != nil {
		return nil, err
	}
	if in := opts.Inherited; in != nil && in.Range != "" {
		if _, err := hashrange.Parse(in.Range); err != nil {
			return nil, fmt.Errorf("%w: Options.Inherited.Range %q: %v", ErrInvalidSelector, in.Range, err)
		}
	}
	c, err := newClient(cfg, res, opts.Wire, opts.Compression)
	if err != nil {
		return nil, err
	}
	c.transform = opts.Transform
	l := &Loop{j: j, w: j.Writer(), c: c, opts: opts, changed: make(chan struct{}), verify: make(chan struct{}, 1), pageSize: opts.PageSize}
	l.status.ShardMode = c.shard.mode
	l.log = opts.Logger.WithValues("resource", res.String())
	if err := l.checkKind(cfg, res); err != nil {
		return nil, err
	}
	l.checkProto()
	l.loadListMode()
	return l, nil
}

// Run lists and watches until ctx is done, then returns nil after the open
// transaction, if any, has committed. It returns early only when the
// journal cannot be written (ErrJournal) or the apiserver rejects the
// request itself (ErrRejected: a 400 for a field selector it does not
// support, say); such an error is returned even when ctx ends at the same
// moment. Other apiserver errors (403, 404, 429, 5xx, timeouts) are
// retried with backoff and shown in Status. When New could not ask
// discovery for the kind, Run retries that in a goroutine of its own,
// which has exited when Run returns (kind.go).
func (l *Loop) Run(ctx context.Context) (err error) {
	var s state = stateStart{}
	defer func() { l.stopped(err) }()
	// The kind's retry (kind.go) ends with Run: stopped, then waited for.
	kctx, stopKind := context.WithCancel(ctx)
	defer l.startKindRetry(kctx)()
	defer stopKind()
	for {
		l.update(func(st *Status) {
			st.Phase = s.phase()
			if b, ok := s.(stateBackoff); ok {
				st.LastError = b.err // of every backoff: fail's or a watch frame's
			}
		})
		next, err := l.step(ctx, s)
		if err != nil {
			// Before ctx: an error that happened as ctx ended is still
			// the caller's to see.
			msg := "stopping: journal write failed"
			if errors.Is(err, ErrRejected) {
				msg = "stopping: the apiserver rejected the request"
			}
			l.log.Error(err, msg)
			return err
		}
		if ctx.Err() != nil {
			return nil
		}
		s = next
	}
}

// step runs one state and returns the next. An error is fatal. Each
// state is one function (state.go); the backoff is a state of its own.
func (l *Loop) step(ctx context.Context, s state) (state, error) {
	switch s := s.(type) {
	case stateStart:
		return l.start()
	case stateList:
		return l.list(ctx, s)
	case stateVerify:
		return l.verifyCheck(ctx, s)
	case stateWatch:
		return l.watch(ctx, s)
	case stateBackoff:
		return l.backoffWait(ctx, s), nil
	}
	return nil, fmt.Errorf("reconcile: unknown state %T", s)
}

// start resumes the watch from the stored resourceVersion, or lists when
// the file holds none.
func (l *Loop) start() (state, error) {
	rv, err := l.j.ResourceVersion()
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrJournal, err)
	}
	if rv == "" {
		l.log.Info("no stored resourceVersion: initial list")
		return stateList{origin: journal.OriginRelist}, nil
	}
	l.log.Info("resuming from stored resourceVersion", "resourceVersion", rv)
	l.restartVerify = true
	l.update(func(st *Status) { st.ResourceVersion = rv })
	// The resume check (probe.go) runs before the watch opens.
	return stateWatch{rv: rv, goneOrigin: journal.OriginRestart, check: true}, nil
}

// backoffWait waits out the backoff s and returns the state that failed.
// A refused watch (429, 5xx, network) is so retried as a watch from the
// same resourceVersion and never becomes a relist, the most expensive
// request there is for a server that sheds load
// (kubernetes/kubernetes#100878). Only what says the resourceVersion is
// gone relists, without a backoff (gone).
func (l *Loop) backoffWait(ctx context.Context, s stateBackoff) state {
	d := l.nextBackoff()
	asked, throttled := serverDelay(s.err)
	d = max(d, asked)
	throttled = throttled || apierrors.IsTooManyRequests(s.err)
	var why string
	l.update(func(st *Status) {
		st.Backoffs++
		why = countBackoff(&st.BackoffsByReason, s.err)
		if throttled {
			st.Throttled++
		}
	})
	// One clear line per kind of failure, not one per retry.
	// The first of a kind is an error (logr's Error); throttling is
	// info, as load shedding is the server working as designed; a
	// repeat is V(1) (debug).
	msg := "backing off: " + why
	if throttled {
		msg = "throttled by the apiserver: waiting at least as long as it asks"
	}
	kv := []any{"delay", d, "serverDelay", asked, "then", string(s.next.phase())}
	switch key := failureKey(s.err); {
	case key == l.lastLogged:
		l.log.V(1).Info(msg, append(kv, "error", s.err)...)
	case throttled:
		l.lastLogged = key
		l.log.Info(msg, append(kv, "error", s.err)...)
	default:
		l.lastLogged = key
		l.log.Error(s.err, msg, kv...)
	}
	select {
	case <-ctx.Done():
	case <-l.opts.Clock.After(d):
	}
	return s.next
}

// fail returns a backoff to next after err, or records err and ends Run
// when the server rejected the request itself.
func (l *Loop) fail(next state, err error) (state, error) {
	if isRejected(err) {
		l.update(func(st *Status) { st.LastError = err })
		return nil, fmt.Errorf("%w: %w", ErrRejected, err)
	}
	return stateBackoff{next: next, err: err}, nil
}

// succeed resets the backoff and the last error.
func (l *Loop) succeed() {
	l.backoff = nil
	l.lastLogged = ""
	l.update(func(st *Status) { st.LastError = nil })
}

// nextBackoff returns the wait after a failure, in [b/2, b) for b doubling
// from MinBackoff up to MaxBackoff (wait.Backoff jitters above Duration).
func (l *Loop) nextBackoff() time.Duration {
	if l.backoff == nil {
		l.backoff = &wait.Backoff{Duration: l.opts.MinBackoff / 2, Factor: 2, Jitter: 1, Steps: math.MaxInt32, Cap: l.opts.MaxBackoff / 2}
	}
	return l.backoff.Step()
}

// Verify asks the loop to relist and diff against the index at its next
// chance (anti-entropy), as if the watch had been lost; events it finds
// count as divergences in Status. It does not wait.
func (l *Loop) Verify() {
	select {
	case l.verify <- struct{}{}:
	default:
	}
}

// Status returns a snapshot of the loop's state.
func (l *Loop) Status() Status {
	l.mu.Lock()
	defer l.mu.Unlock()
	st := l.status
	st.Requests, st.BytesReceived = l.c.requests.Load(), l.c.bytes.Load()
	return st
}

// WaitFor blocks until cond holds for the loop's status, or ctx is done
// (ctx.Err()). It is woken by each status change; it does not poll.
func (l *Loop) WaitFor(ctx context.Context, cond func(Status) bool) error {
	for {
		l.mu.Lock()
		st, ch := l.status, l.changed
		l.mu.Unlock()
		if cond(st) {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-ch:
		}
	}
}

func (l *Loop) update(fn func(*Status)) {
	l.mu.Lock()
	fn(&l.status)
	switch st := &l.status; {
	case st.LastError == nil:
		st.FailingSince = time.Time{}
	case st.FailingSince.IsZero():
		st.FailingSince = l.opts.Clock.Now()
	}
	close(l.changed)
	l.changed = make(chan struct{})
	l.mu.Unlock()
}
