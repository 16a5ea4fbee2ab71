package position

// The warm standby of a controller's sources, the one implementation
// behind crsource's (Options.Standby: one source, two annotations) and
// jcache.Exact's (ExactOptions.Standby: every source of a controller in
// one JSON annotation). The adapters say what differs (Codec, the
// Sources, the error prefix); the rest is here:
//
//   - the settings' defaults (NewStandby) and the Lease (NewLease);
//   - the Runnables (AddToManager): the publisher on the leader only
//     (Publisher over every source's Tracker), the follower on every
//     replica (Follow: each source not started here follows its entry);
//   - where a new leader's source starts (Start): its entry placed in
//     its own journal (StartFor), or after its own commit when that is
//     later; an entry it cannot place is the adapter's to handle (a
//     resync, a replay, or the source's own commit), with why.
//
// States of a replica: standby (writer or cache, follower) → leader
// (sources, publisher) → stopped; controller-runtime ends the process
// when leadership is lost, so there is no way back to standby.

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sync"
	"time"

	"github.com/go-logr/logr"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	"github.com/watchjournal/watchjournal/journal"
)

// Config is a standby's settings: the fields of jcache.Standby (which
// crsource.Standby is), in its order, so that one converts to the other.
type Config struct {
	Namespace string
	Name      string
	Identity  string
	Interval  time.Duration
	Commits   int
}

// Entry is one source's published position: the resourceVersion up to
// which its events are reconciled, and the resource (Resource) it
// belongs to.
type Entry struct {
	ResourceVersion string `json:"resourceVersion"`
	Resource        string `json:"resource"`
}

// Codec is how the position Lease's annotations hold the entries, by
// consumer name.
type Codec struct {
	// Encode returns the annotations for entries (never empty).
	Encode func(entries map[string]Entry) map[string]string
	// Decode returns the entries of the annotations; nil when there are
	// none, an error when they do not parse.
	Decode func(ann map[string]string) (map[string]Entry, error)
}

// Source is what a Standby needs of one of its sources.
type Source interface {
	// Entry returns the source's consumer name and Resource, "" before
	// they are known.
	Entry() (name, resource string)
	// Tracker returns the position of the source's consumer.
	Tracker() *Tracker
	// Committed returns the source's journal (nil before it is known)
	// and its consumer's committed offset.
	Committed() (*journal.Journal, uint64, error)
	// Stopped returns a channel closed once the source made its final
	// commit; nil when there is none to wait for.
	Stopped() <-chan struct{}
}

// Standby is the warm standby of one controller's sources. Make it with
// NewStandby; set Codec, Sources and Log before AddToManager.
type Standby struct {
	Config
	// Prefix starts its errors ("crsource", "jcache").
	Prefix string
	Codec  Codec
	// NoPosition is why a source starts without one, followed by the
	// Lease's name ("no position published on Lease ").
	NoPosition string
	// Carry publishes the entries read at start for the sources that
	// have no position of their own yet (jcache: sources not started).
	Carry bool
	// Sources returns the sources whose positions are published.
	Sources func() []Source
	// Log is the publisher's logger.
	Log    logr.Logger
	Signal *Signal
	Lease  *Lease // set by NewLease

	mu    sync.Mutex
	added bool             // AddToManager was called
	read  map[string]Entry // what the first source to start read
}

// NewStandby returns a Standby for c with the defaults filled in: Name
// defaultName, Identity the host name, Interval DefaultInterval. field
// names the option in the error for an empty Namespace
// ("crsource: Options.Standby.Namespace is empty").
func NewStandby(c Config, prefix, field, defaultName string) (*Standby, error) {
	if c.Namespace == "" {
		return nil, fmt.Errorf("%s: %s.Namespace is empty", prefix, field)
	}
	if c.Name == "" {
		c.Name = defaultName
	}
	if c.Identity == "" {
		c.Identity, _ = os.Hostname()
	}
	if c.Interval <= 0 {
		c.Interval = DefaultInterval
	}
	return &Standby{Config: c, Prefix: prefix, Signal: NewSignal()}, nil
}

// NewLease sets the position Lease, with a client made from cfg.
func (sb *Standby) NewLease(cfg *rest.Config) error {
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return fmt.Errorf("%s: %w", sb.Prefix, err)
	}
	sb.Lease = &Lease{Client: cs.CoordinationV1().Leases(sb.Namespace), Namespace: sb.Namespace, Name: sb.Name, Identity: sb.Identity}
	return nil
}

// runnable is a manager.Runnable with its NeedLeaderElection.
type runnable struct {
	leader bool
	run    func(context.Context) error
}

func (r runnable) NeedLeaderElection() bool        { return r.leader }
func (r runnable) Start(ctx context.Context) error { return r.run(ctx) }

// AddToManager adds the publisher (on the leader only) and follow (on
// every replica: NeedLeaderElection false) to mgr, and marks the standby
// added.
func (sb *Standby) AddToManager(mgr manager.Manager, follow func(context.Context) error) error {
	if err := mgr.Add(runnable{leader: true, run: sb.publish}); err != nil {
		return err
	}
	if err := mgr.Add(runnable{run: follow}); err != nil {
		return err
	}
	sb.mu.Lock()
	sb.added = true
	sb.mu.Unlock()
	return nil
}

// Added reports whether AddToManager was called.
func (sb *Standby) Added() bool {
	sb.mu.Lock()
	defer sb.mu.Unlock()
	return sb.added
}

// entries returns what to publish: with Carry, the entries read at start,
// overlaid with every source's current position.
func (sb *Standby) entries() map[string]Entry {
	out := map[string]Entry{}
	if sb.Carry {
		sb.mu.Lock()
		for k, v := range sb.read {
			out[k] = v
		}
		sb.mu.Unlock()
	}
	for _, s := range sb.Sources() {
		name, res := s.Entry()
		if pos := s.Tracker().Position(); name != "" && res != "" && pos != "" {
			out[name] = Entry{ResourceVersion: pos, Resource: res}
		}
	}
	return out
}

// publish publishes until ctx is done, then once more after the sources'
// final commits (Publisher).
func (sb *Standby) publish(ctx context.Context) error {
	pub := &Publisher{Lease: sb.Lease, Signal: sb.Signal, Interval: sb.Interval, Commits: sb.Commits, Log: sb.Log,
		Annotations: func() map[string]string {
			m := sb.entries()
			if len(m) == 0 {
				return nil
			}
			return sb.Codec.Encode(m)
		},
		// With the commit at the head, the journal's resourceVersion
		// moves on with the watch's bookmarks, and so does the
		// position, though nothing is committed (a quiet resource).
		Refresh: func() {
			for _, s := range sb.Sources() {
				if j, c, err := s.Committed(); err == nil && j != nil && c > 0 {
					s.Tracker().Note(j, c)
				}
			}
		},
		Stopped: func(ctx context.Context) {
			for _, s := range sb.Sources() {
				if ch := s.Stopped(); ch != nil {
					select {
					case <-ch:
					case <-ctx.Done():
						return
					}
				}
			}
		},
	}
	return pub.Run(ctx)
}

// Target is one source a follower moves behind its published entry.
type Target struct {
	Name     string // the consumer, the entry's key
	Resource string // Resource of its journal
	Follower *Follower
	// Started reports whether the source started on this replica: then
	// it is not touched any more.
	Started func() bool
}

// Follow reads the Lease every Interval and steps each target that has
// not started here to its entry (when the entry is of its resource),
// until ctx is done or every target started.
func (sb *Standby) Follow(ctx context.Context, ts []Target) {
	Follow(ctx, sb.Lease, sb.Interval, func(ann map[string]string) bool {
		m, err := sb.Codec.Decode(ann)
		if err != nil {
			return true
		}
		waiting := false
		for _, t := range ts {
			if t.Started() {
				continue
			}
			waiting = true
			if e, ok := m[t.Name]; ok && e.Resource == t.Resource {
				t.Follower.Step(e.ResourceVersion)
			}
		}
		return waiting
	})
}

// read reads the Lease's entries, again every second while that fails but
// for a refusal (RBAC); nil and ctx's error when ctx ends first.
func (sb *Standby) readEntries(ctx context.Context, log logr.Logger) (map[string]Entry, error) {
	for {
		m, err := sb.get(ctx)
		if err == nil {
			return m, nil
		}
		if apierrors.IsForbidden(err) || apierrors.IsUnauthorized(err) {
			return nil, fmt.Errorf("%s: reading the position Lease %s (RBAC: get, create, update on leases.coordination.k8s.io in %s): %w",
				sb.Prefix, sb.Lease, sb.Namespace, err)
		}
		log.Error(err, "reading the position Lease failed; retrying", "lease", sb.Lease.String())
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(time.Second):
		}
	}
}

func (sb *Standby) get(ctx context.Context) (map[string]Entry, error) {
	ann, ok, err := sb.Lease.Get(ctx)
	if err != nil || !ok {
		return nil, err
	}
	return sb.Codec.Decode(ann)
}

// Start places the published entry of a new leader's source name (of
// resource, on journal j, whose consumer has committed committed when it
// exists) and, when it can, calls seek with the offset to start at: right
// after what the entry covers, or after the consumer's own commit when
// that is later. Then publishes never go below the entry (t), and the log
// says where it starts. Without a place, why says why (the caller starts
// as it would without a standby); why is "" when ctx ended first.
func (sb *Standby) Start(ctx context.Context, log logr.Logger, j *journal.Journal, t *Tracker, name, resource string,
	committed uint64, exists bool, seek func(start uint64) error) (why string, err error) {
	m, err := sb.readEntries(ctx, log)
	if err != nil {
		if ctx.Err() != nil && errors.Is(err, ctx.Err()) {
			return "", nil
		}
		return "", err
	}
	sb.mu.Lock()
	if sb.read == nil {
		sb.read = m
	}
	sb.mu.Unlock()
	p, found := m[name]
	lease := sb.Lease.String()
	switch {
	case !found || p.ResourceVersion == "":
		return sb.NoPosition + lease, nil
	case p.Resource != resource:
		return fmt.Sprintf("the position on Lease %s is for another resource (%s, not %s)", lease, p.Resource, resource), nil
	}
	start, how, ok, err := StartFor(j, p.ResourceVersion, 0)
	if err != nil {
		return "", fmt.Errorf("%s: placing the position %s: %w", sb.Prefix, p.ResourceVersion, err)
	}
	if !ok {
		return how, nil
	}
	if exists && committed+1 > start {
		start, how = committed+1, "this replica's own commit is later: "+how
	}
	t.Set(p.ResourceVersion) // publishes never go below where this leader starts
	if err := seek(start); err != nil {
		return "", err
	}
	log.Info("starting from the published position", "resourceVersion", p.ResourceVersion, "offset", start, "how", how)
	return "", nil
}
