package jcache

// Feeds: one journal file and the reconcile.Loop that writes it, per
// journal.Resource, shared by every informer that needs that resource.
//
// controller-runtime keeps typed and unstructured informers apart, so a
// cache that is asked for *corev1.Pod and for an unstructured Pod builds
// two informers of one resource; a file has one writer (journal's
// exclusive lock). So informers do not own files: they acquire a feed from
// the registry (keyed by file path, for the whole process) and release it
// when they stop. The last release stops the loop, waits for it, and
// closes the file; an acquire of a feed that is closing waits for the close
// and opens the file again (RemoveInformer, then GetInformer).
//
// States of a feed: opening (the file opens, the loop asks discovery for
// the kind; the registry's lock is not held) → open (file open, loop
// built, not running) → running (Run's goroutine, with the file's
// retention and record of the handlers (retention.go, catchup.go), its
// pager (pages.go) and its inspect socket, FILE.sock, for journalctl) →
// closing (refs 0: loop cancelled) → closed (file closed, out of the
// registry).
//
// Files. Options.Dir holds one file per resource and scope (fileName). New
// uses DefaultDir, else $WATCHJOURNAL_CACHE_DIR, else a temporary directory
// per cache, removed when Start returns. A scope no longer asked for (a
// changed selector) leaves its file behind; so does a feed that closed,
// for the next start. journalctl stats --db DIR shows each file of a cache
// directory through its inspect socket, FILE.sock, while the cache runs
// (Options.NoSocket).

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"

	"k8s.io/client-go/rest"

	"github.com/watchjournal/watchjournal/journal"
	"github.com/watchjournal/watchjournal/journal/inspect"
	"github.com/watchjournal/watchjournal/reconcile"
)

// feed is one journal file and its loop.
type feed struct {
	cfg  *rest.Config // to open the file again (transform.go)
	path string
	res  journal.Resource
	j    *journal.Journal

	// The loop that writes the file: one for the feed's life, or, for a
	// ranged feed, one per range (feedrange.go). Read it with loop().
	lmu     sync.Mutex
	lp      *reconcile.Loop
	swapped chan struct{} // closed when lp is replaced
	// group is the shard group whose range the file journals, nil when it
	// journals the whole resource (feedrange.go).
	group *shardGroup
	// moving is true while a ranged feed's loop is replaced by one at
	// another range, after the old one had synced (feedrange.go).
	moving atomic.Bool
	// servedOnce is true once a ranged feed's loop has synced.
	servedOnce atomic.Bool

	// Guarded by registry.mu.
	refs    int
	opening chan struct{} // non-nil while acquire opens the file; closed then
	running bool
	cancel  context.CancelFunc
	closed  chan struct{} // closed once the file is closed
	runErr  error

	hmu     sync.Mutex
	holders map[*registration]struct{} // handlers holding retention (retention.go)
	// The record of the handlers last current (catchup.go), guarded by
	// hmu. record is P, read when the file opened (hasRecord: there was
	// one): every registration catches up from it. While capped, the
	// rounds commit at most limit (P, or the floor of a handler that
	// stopped); gen counts the caps, so that only a registration that
	// joined under the current one lifts it (registration.gen); caughtUp
	// once one has caught up.
	record    uint64
	hasRecord bool
	capped    bool
	limit     uint64
	gen       uint64
	caughtUp  bool
	// committed is the hold the last round committed.
	committed uint64
	opts      *Options

	pages pages // resident pages given back (pages.go)

	tail tail // the watch's batches in flight, before their commits (tail.go)

	reindexes reindexes // reindex runs of its indexes (diskindex.go)

	tmu sync.Mutex
	wt  writeTransform // the transform its objects are stored under (transform.go)
}

// registry holds the process's open feeds by path.
var registry = struct {
	mu    sync.Mutex
	feeds map[string]*feed
}{feeds: map[string]*feed{}}

// fileName is the journal file of res in a cache directory: the resource
// as reconcile.FileName names it, then a short hash of the whole resource
// (namespace, selectors, metadata-only), so that each scope has a file.
func fileName(res journal.Resource) string {
	h := sha256.Sum256([]byte(res.String()))
	base := strings.TrimSuffix(reconcile.FileName(res.GVR), ".db")
	if res.Namespace != "" {
		base += "." + res.Namespace
	}
	if res.MetadataOnly {
		base += ".meta"
	}
	return base + "." + hex.EncodeToString(h[:6]) + ".db"
}

// acquire returns the feed of res in dir, opening its file and building
// its loop when no informer holds it. The registry's lock is not held
// while the file opens and the loop asks discovery for the kind: a
// placeholder (opening) makes a concurrent acquire of the same path wait.
//
// With a group, the feed is ranged: its file, named apart from the
// whole resource's, journals only the group's range (feedrange.go).
func acquire(cfg *rest.Config, dir string, res journal.Resource, o *Options, g *shardGroup) (*feed, error) {
	path := filepath.Join(dir, fileName(res))
	if g != nil {
		path = rangedPath(path, g)
	}
	for {
		registry.mu.Lock()
		f, ok := registry.feeds[path]
		if !ok {
			break
		}
		if f.refs > 0 && f.opening == nil {
			if opt := optionsConflict(f.opts, o, res, g != nil); opt != "" {
				registry.mu.Unlock()
				return nil, &OptionsConflictError{Path: path, Option: opt}
			}
			f.refs++
			registry.mu.Unlock()
			return f, nil
		}
		// Opening or closing: wait for it, then look again.
		wait := f.closed
		if f.opening != nil {
			wait = f.opening
		}
		registry.mu.Unlock()
		<-wait
	}
	f := &feed{cfg: cfg, path: path, res: res, group: g, refs: 1, closed: make(chan struct{}), opening: make(chan struct{}), swapped: make(chan struct{})}
	registry.feeds[path] = f
	registry.mu.Unlock()

	f.opts = o // read by the loop's transform (transformObject)
	j, loop, err := f.open()
	var record uint64
	hasRecord := false
	if err == nil {
		record, err = j.Consumers().Committed(RetentionConsumer)
		hasRecord = err == nil
		if errors.Is(err, journal.ErrNoConsumer) {
			err = nil
		} else if err != nil {
			_ = j.Close()
			err = fmt.Errorf("jcache: %s: %w", res, err)
		}
	}
	registry.mu.Lock()
	defer registry.mu.Unlock()
	close(f.opening)
	f.opening = nil
	if err != nil {
		delete(registry.feeds, path)
		close(f.closed)
		return nil, err
	}
	f.j, f.lp, f.opts = j, loop, o
	f.record, f.hasRecord, f.capped, f.limit, f.committed = record, hasRecord, hasRecord, record, record
	f.pages.kick = make(chan struct{}, 1)
	f.tail.read = f.storedObject
	if g != nil {
		g.fileSynced(f, nil, false) // no range held until its loop syncs (feedrange.go)
	}
	return f, nil
}

// open opens f's journal file, keeping objects, and builds its loop
// (newLoop). A ranged feed's file opens at the range it records
// (feedrange.go).
func (f *feed) open() (*journal.Journal, *reconcile.Loop, error) {
	res := f.res
	if f.group != nil {
		sel, err := recordedShard(f.path, f.opts)
		if err != nil {
			return nil, nil, fmt.Errorf("jcache: %s: %w", res, err)
		}
		res.ShardSelector = sel
	}
	j, err := openSealed(f.path, res, f.opts) // seal.go
	if err != nil {
		return nil, nil, err
	}
	if err := j.Settings().KeepObjects(); err != nil {
		_ = j.Close()
		return nil, nil, fmt.Errorf("jcache: %s: %w", res, err)
	}
	loop, err := f.newLoop(j)
	if err != nil {
		_ = j.Close()
		return nil, nil, err
	}
	return j, loop, nil
}

// newLoop builds a loop that writes j at the range it records, storing
// each object as f's transform returns it and showing each watch batch
// to the tail before committing it (tail.go).
func (f *feed) newLoop(j *journal.Journal) (*reconcile.Loop, error) {
	o := f.opts
	lo := o.Loop
	lo.SecretPayloads = true // always sealed (seal.go)
	lo.Transform = f.transformObject
	lo.Staged = f.tail.stage
	if lo.Logger.GetSink() == nil {
		lo.Logger = o.Logger
	}
	loop, err := reconcile.New(f.cfg, j, lo)
	if err != nil {
		return nil, fmt.Errorf("jcache: %s: %w", f.res, err)
	}
	return loop, nil
}

// loop returns the loop that writes the file now.
func (f *feed) loop() *reconcile.Loop {
	f.lmu.Lock()
	defer f.lmu.Unlock()
	return f.lp
}

// currentLoop returns the loop that writes the file now and the channel
// closed when another replaces it.
func (f *feed) currentLoop() (*reconcile.Loop, <-chan struct{}) {
	f.lmu.Lock()
	defer f.lmu.Unlock()
	return f.lp, f.swapped
}

// setLoop makes l the loop that writes the file.
func (f *feed) setLoop(l *reconcile.Loop) {
	f.lmu.Lock()
	defer f.lmu.Unlock()
	f.lp = l
	close(f.swapped)
	f.swapped = make(chan struct{})
}

// waitFor blocks until cond holds for the status of the loop that
// writes the file (following a ranged feed's loop as it is replaced), or
// ctx is done (ctx.Err()).
func (f *feed) waitFor(ctx context.Context, cond func(reconcile.Status) bool) error {
	return f.onLoop(ctx, func(ctx context.Context, l *reconcile.Loop) error { return l.WaitFor(ctx, cond) })
}

// onLoop calls wait with the loop that writes the file and returns its
// error; for a ranged feed, a wait cut short because another loop
// replaced that one is made again on the new loop.
func (f *feed) onLoop(ctx context.Context, wait func(context.Context, *reconcile.Loop) error) error {
	if f.group == nil {
		return wait(ctx, f.loop())
	}
	for {
		l, swapped := f.currentLoop()
		wctx, cancel := context.WithCancel(ctx)
		go func() { // ends with wctx
			select {
			case <-swapped:
				cancel()
			case <-wctx.Done():
			}
		}()
		err := wait(wctx, l)
		replaced := wctx.Err() != nil && ctx.Err() == nil
		cancel()
		if err == nil || !replaced {
			return err
		}
	}
}

// waitForSync is the loop's WaitForSync, following a ranged feed's loop
// as it is replaced: a loop that stopped because its range changed is
// followed by the next one, until the feed closes.
func (f *feed) waitForSync(ctx context.Context) error {
	for {
		l, swapped := f.currentLoop()
		err := l.WaitForSync(ctx)
		if err == nil || ctx.Err() != nil || f.group == nil || !errors.Is(err, reconcile.ErrStopped) {
			return err
		}
		select {
		case <-swapped:
		case <-f.closed:
			return err
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// start runs the loop, once, until the last release.
func (f *feed) start() {
	registry.mu.Lock()
	defer registry.mu.Unlock()
	if f.running || f.refs == 0 {
		return
	}
	f.running = true
	ctx, cancel := context.WithCancel(context.Background())
	// The loop, the file's retention and its inspect socket; done once
	// all have returned.
	var wg sync.WaitGroup
	wg.Go(func() {
		run := f.loop().Run
		if f.group != nil {
			run = f.follow // feedrange.go
		}
		err := run(ctx)
		registry.mu.Lock()
		f.runErr = err
		registry.mu.Unlock()
	})
	wg.Go(func() {
		p, _ := f.opts.policy()
		if err := f.retain(ctx, p, f.opts); err != nil && ctx.Err() == nil && !errors.Is(err, journal.ErrClosed) {
			f.opts.Logger.Error(err, "retention of a cache file stopped", "resource", f.res.String())
		}
	})
	wg.Go(func() { f.pager(ctx, f.pages.kick) })
	if !f.opts.NoSocket {
		wg.Go(func() {
			if err := inspect.Serve(ctx, f.j, liveLoop{f}, &inspect.Options{Logger: f.opts.Logger}); err != nil {
				f.opts.Logger.Error(err, "the cache file's inspect socket is not served (journalctl cannot read the file while the cache runs)",
					"socket", inspect.SocketPath(f.path))
			}
		})
	}
	f.cancel = func() { cancel(); wg.Wait() }
}

// release drops one reference; the last stops the loop and closes the
// file.
func (f *feed) release() {
	registry.mu.Lock()
	f.refs--
	if f.refs > 0 {
		registry.mu.Unlock()
		return
	}
	stop := f.cancel
	registry.mu.Unlock()
	if stop != nil {
		stop()
	}
	f.reindexes.stop()
	if f.group != nil {
		f.group.fileSynced(f, nil, true)
	}
	_ = f.j.Close()
	registry.mu.Lock()
	delete(registry.feeds, f.path)
	registry.mu.Unlock()
	close(f.closed)
}

// stopped reports whether the loop has returned with an error or the feed
// is closed.
func (f *feed) stopped() bool {
	select {
	case <-f.closed:
		return true
	default:
	}
	registry.mu.Lock()
	defer registry.mu.Unlock()
	return f.runErr != nil
}

// storedObject returns a copy of the object the file holds for key, nil
// when it holds none.
func (f *feed) storedObject(key string) ([]byte, error) {
	var b []byte
	err := f.j.ViewObjects(func(v *journal.ObjectView) error {
		o, ok, err := v.Get(key)
		if ok {
			b = append([]byte(nil), o...)
		}
		return err
	})
	return b, err
}
