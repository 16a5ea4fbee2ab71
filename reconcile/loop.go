package reconcile

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"time"

	"go.uber.org/zap"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/rest"
	"k8s.io/utils/clock"

	"github.com/watchjournal/watchjournal/journal"
)

// Options configure a Loop. Zero fields take the defaults given.
type Options struct {
	// PageSize is the list limit per page, in objects. Default 500, as
	// client-go's reflector and kube-rs's watcher.
	PageSize int64
	// WatchTimeout is the timeoutSeconds asked of each watch; the server
	// ends the watch after it and the loop resumes from the last
	// resourceVersion. Default 5 minutes, plus up to 100% jitter.
	WatchTimeout time.Duration
	// IdleTimeout is how long a watch may deliver nothing (no event, no
	// bookmark) before the loop replaces it with a new watch from the same
	// resourceVersion, on a new connection. It bounds how long a stalled
	// connection (open, but passing no bytes) goes unnoticed; on a quiet
	// resource it costs one watch request per IdleTimeout. Default 2
	// minutes; the apiserver's bookmarks (watch cache on) keep a healthy
	// watch from idling.
	IdleTimeout time.Duration
	// VerifyInterval, when positive, relists that often even while the
	// watch is healthy and diffs the list against the index (anti-entropy):
	// an event the watch lost (kubernetes/kubernetes#123072) shows up as a
	// divergence and is journaled with origin relist. Zero: only Verify and
	// 410s relist.
	VerifyInterval time.Duration
	// RequestTimeout bounds the time to first byte of each request: a list
	// page (and a watch) must begin its response (status and headers)
	// within it, or the request is abandoned (ErrNoResponse). It does not
	// bound the body: a page of large objects on a slow link takes as long
	// as its bytes take, as long as they keep coming (ProgressTimeout).
	// Default 60 s.
	RequestTimeout time.Duration
	// ProgressTimeout bounds a gap in a list response's body: a read that
	// waits this long without a byte abandons the page (ErrNoProgress);
	// time the loop spends between reads does not count. A page whose body breaks
	// (a gap, a cut, an early end) is requested again from the same point;
	// one that keeps breaking halves the page size, down to one object,
	// for this list and the loop's later ones (logged at warn). Default
	// 30 s.
	ProgressTimeout time.Duration
	// BatchLimit is the most watch events committed in one transaction
	// (group commit). Default 1000.
	BatchLimit int
	// MinBackoff and MaxBackoff bound the jittered exponential backoff
	// between failed attempts. Defaults 200 ms and 30 s.
	MinBackoff, MaxBackoff time.Duration
	// SecretPayloads is the explicit opt-in to journal the data of Secrets
	// (core/v1 secrets). Without it New refuses a journal of Secrets whose
	// Resource is not MetadataOnly: a Secret's data never reaches the disk
	// by default.
	SecretPayloads bool
	// Logger receives one line per state change and per error. Nil: none.
	Logger *zap.Logger
	// Clock drives backoff waits; tests may pass a fake. Default real time.
	Clock clock.WithTicker
}

func (o Options) withDefaults() Options {
	if o.PageSize <= 0 {
		o.PageSize = 500
	}
	if o.WatchTimeout <= 0 {
		o.WatchTimeout = 5 * time.Minute
	}
	if o.IdleTimeout <= 0 {
		o.IdleTimeout = 2 * time.Minute
	}
	if o.RequestTimeout <= 0 {
		o.RequestTimeout = 60 * time.Second
	}
	if o.ProgressTimeout <= 0 {
		o.ProgressTimeout = 30 * time.Second
	}
	if o.BatchLimit <= 0 {
		o.BatchLimit = 1000
	}
	if o.MinBackoff <= 0 {
		o.MinBackoff = 200 * time.Millisecond
	}
	if o.MaxBackoff <= 0 {
		o.MaxBackoff = 30 * time.Second
	}
	if o.Logger == nil {
		o.Logger = zap.NewNop()
	}
	if o.Clock == nil {
		o.Clock = clock.RealClock{}
	}
	return o
}

// maxWatchFailures is how many failed watches in a row, from one
// resourceVersion, send the loop to a relist.
const maxWatchFailures = 5

// Status is a snapshot of a Loop.
type Status struct {
	// Phase is the current state.
	Phase Phase
	// ResourceVersion is the last resourceVersion fully applied.
	ResourceVersion string
	// Synced is true once a list completed or a resume watch opened.
	Synced bool
	// LastError is the error that caused the last backoff, nil after a
	// success. Match it with errors.Is (ErrList, ErrWatchStart, ErrWatch)
	// and with apierrors.IsForbidden / IsNotFound for the cause.
	LastError error
	// Lists counts completed lists (initial and relists); Watches counts
	// watch requests that opened; Gone counts 410s seen, in any shape;
	// ListRestarts counts lists started again after an expired continue;
	// IdleRestarts counts watches replaced after IdleTimeout.
	Lists, Watches, Gone, ListRestarts, IdleRestarts int
	// Events counts events this loop appended to the journal.
	Events int
	// Verifies counts anti-entropy relists (Verify, VerifyInterval);
	// Divergences counts the events they found, which the watch had lost.
	Verifies, Divergences int
	// LastVerifyFirst and LastVerifyLast are the offsets the last verify
	// journaled, inclusive; both 0 when it found nothing.
	LastVerifyFirst, LastVerifyLast uint64
}

// Loop keeps one journal in step with one resource. Create it with New and
// run it with Run; it is the journal's only writer.
type Loop struct {
	j    *journal.Journal
	c    *client
	opts Options
	log  *zap.Logger

	mu      sync.Mutex
	status  Status
	changed chan struct{} // closed and replaced on every status change

	verify chan struct{} // Verify's request, buffered 1
	// fullPages is set once the server answered a metadata-only list with
	// full objects (or 406): relists then read full pages.
	fullPages bool
	// pageSize is the list page size once pages kept breaking mid-body
	// (pageBroke); 0: Options.PageSize.
	pageSize int64

	backoff    time.Duration // current backoff; 0 after a success
	watchFails int           // watch failures in a row since a success
	lastLogged string        // the last failure logged at Warn
}

// New returns a Loop that keeps j in step with the resource j records, read
// through the apiserver at cfg. The resource must be recorded (journal.Open
// with Options.Resource); otherwise New fails.
func New(cfg *rest.Config, j *journal.Journal, opts Options) (*Loop, error) {
	res, ok := j.Resource()
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
	if res.GVR.Group == "" && res.GVR.Resource == "secrets" && !res.MetadataOnly && !opts.SecretPayloads {
		return nil, ErrSecretPayloads
	}
	c, err := newClient(cfg, res, res.MetadataOnly)
	if err != nil {
		return nil, err
	}
	l := &Loop{j: j, c: c, opts: opts, changed: make(chan struct{}), verify: make(chan struct{}, 1)}
	l.log = opts.Logger.With(zap.String("resource", res.String()))
	return l, nil
}

// Run lists and watches until ctx is done, then returns nil after the open
// transaction, if any, has committed. It returns early only when the
// journal cannot be written (ErrJournal) or the apiserver rejects the
// request itself (ErrRejected: a 400 for a field selector it does not
// support, say). Other apiserver errors (403, 404, 5xx, timeouts) are
// retried with backoff and shown in Status.
func (l *Loop) Run(ctx context.Context) error {
	var s state = stateStart{}
	defer l.update(func(st *Status) { st.Phase = PhaseStopped })
	for {
		l.update(func(st *Status) { st.Phase = s.phase() })
		next, err := l.step(ctx, s)
		if ctx.Err() != nil {
			return nil
		}
		if err != nil {
			l.log.Error("stopping: journal write failed", zap.Error(err))
			return err
		}
		s = next
	}
}

// step runs one state and returns the next. An error is fatal.
func (l *Loop) step(ctx context.Context, s state) (state, error) {
	switch s := s.(type) {
	case stateStart:
		rv, err := l.j.ResourceVersion()
		if err != nil {
			return nil, fmt.Errorf("%w: %w", ErrJournal, err)
		}
		if rv == "" {
			l.log.Info("no stored resourceVersion: initial list")
			return stateList{origin: journal.OriginRelist}, nil
		}
		l.log.Info("resuming from stored resourceVersion", zap.String("resourceVersion", rv))
		l.update(func(st *Status) { st.ResourceVersion = rv })
		return stateWatch{rv: rv, goneOrigin: journal.OriginRestart}, nil
	case stateList:
		return l.list(ctx, s)
	case stateWatch:
		return l.watch(ctx, s)
	case stateBackoff:
		var answered apierrors.APIStatus
		if w, ok := s.next.(stateWatch); ok && errors.As(s.err, &answered) {
			// A watch the server keeps refusing from one resourceVersion
			// will not heal by retrying it (kube-apiserver answers a watch
			// from the exact compaction revision with a 500, "PrevKv=nil",
			// forever): a relist is always safe. Failures to connect do not
			// count: the resume is worth waiting for.
			if l.watchFails++; l.watchFails >= maxWatchFailures {
				l.watchFails = 0
				l.log.Warn("the watch keeps failing from this resourceVersion: relisting",
					zap.String("resourceVersion", w.rv), zap.Error(s.err))
				s.next = stateList{origin: w.goneOrigin}
			}
		}
		d := l.nextBackoff()
		// One clear line per distinct failure, not one per retry.
		logf := l.log.Debug
		if msg := s.err.Error(); msg != l.lastLogged {
			l.lastLogged, logf = msg, l.log.Warn
		}
		logf("backing off: "+reason(s.err), zap.Duration("delay", d), zap.String("then", string(s.next.phase())), zap.Error(s.err))
		select {
		case <-ctx.Done():
		case <-l.opts.Clock.After(d):
		}
		return s.next, nil
	}
	return nil, fmt.Errorf("reconcile: unknown state %T", s)
}

// fail records err and returns a backoff to next, or ends Run when the
// server rejected the request itself.
func (l *Loop) fail(next state, err error) (state, error) {
	if isRejected(err) {
		l.update(func(st *Status) { st.LastError = err })
		return nil, fmt.Errorf("%w: %w", ErrRejected, err)
	}
	l.update(func(st *Status) { st.LastError = err })
	return stateBackoff{next: next, err: err}, nil
}

// succeed resets the backoff and the last error.
func (l *Loop) succeed() {
	l.backoff = 0
	l.watchFails = 0
	l.lastLogged = ""
	l.update(func(st *Status) { st.LastError = nil })
}

func (l *Loop) nextBackoff() time.Duration {
	if l.backoff == 0 {
		l.backoff = l.opts.MinBackoff
	} else {
		l.backoff = min(2*l.backoff, l.opts.MaxBackoff)
	}
	// Full jitter on the upper half: [d/2, d).
	return l.backoff/2 + time.Duration(rand.Int64N(int64(l.backoff/2)+1))
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
	return l.status
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
	close(l.changed)
	l.changed = make(chan struct{})
	l.mu.Unlock()
}
