package reconcile

import (
	"context"
	"errors"
	"fmt"
	"time"

	"golang.org/x/sync/semaphore"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/watchjournal/watchjournal/journal"
)

// frame is one decoded watch frame or the error that ended the stream.
type frame struct {
	ev  watchEvent
	err error
	// weight is what the frame holds of the watch's byte budget.
	weight int64
}

// watchBytes bounds the bytes of objects decoded from a watch and not yet
// committed (the frames queued plus the batch being committed): with large
// objects, BatchLimit frames alone could hold gigabytes (SCENARIOS S12).
// One frame larger than the budget takes all of it.
const watchBytes = 8 << 20

// watch runs one watch request from s.rv and returns the next state.
func (l *Loop) watch(ctx context.Context, s stateWatch) (state, error) {
	if err := l.detectShard(ctx); err != nil {
		if ctx.Err() != nil {
			return s, nil
		}
		return l.fail(s, err)
	}
	if s.check {
		// The resume check's requests first (probe.go); the watch opens
		// in the state it returns.
		return l.checkResume(ctx, s)
	}
	// A resume yet to be proven asks for a short watch: its normal end is
	// the proof on a quiet resource (synced.go).
	proving := l.proving(s)
	timeout := l.watchTimeout()
	if proving {
		timeout = proofWatchTimeout
	}
	st, err := s.open, error(nil)
	s.open = nil
	if st == nil {
		st, err = l.c.watch(ctx, s.rv, timeout, l.opts.RequestTimeout)
	}
	if err != nil {
		if ctx.Err() != nil {
			return s, nil
		}
		if isGone(err) || isCompactedRevision(err) {
			// The HTTP-status shape: 410 on the watch request itself.
			return l.gone(s, err), nil
		}
		// Anything else (429, 5xx, a network error) is retried as this
		// watch, from this resourceVersion, after the backoff.
		s.check = s.check || afterOutage(err)
		return l.fail(s, fmt.Errorf("%w: %w", ErrWatchStart, err))
	}
	defer st.close()
	l.update(func(x *Status) { x.Watches++; x.Phase = PhaseWatching })
	// Only this request starts at the list's resourceVersion: a watch
	// that replaces it (idle, a verify's resume) resumes (replay.go).
	fromList := s.fromList
	s.fromList = false

	frames := make(chan frame, l.opts.BatchLimit)
	budget := semaphore.NewWeighted(watchBytes)
	done, stop := context.WithCancel(ctx)
	defer stop()
	go func() { // exits when the stream ends or errors, which close() forces
		for {
			ev, err := st.next()
			w := min(int64(ev.size()), watchBytes)
			if budget.Acquire(done, w) != nil {
				return
			}
			select {
			case frames <- frame{ev: ev, err: err, weight: w}:
			case <-done.Done():
				return
			}
			if err != nil {
				return
			}
		}
	}()

	start := l.opts.Clock.Now()
	got := 0
	idle := l.opts.Clock.NewTimer(l.opts.IdleTimeout)
	defer idle.Stop()
	// Open with 200 and no error for watchSettle: the watch is healthy,
	// even if the resource is quiet and sends nothing.
	settle := l.opts.Clock.NewTimer(watchSettle)
	defer settle.Stop()
	settled := settle.C()
	verifyTick, stopVerify := l.verifyTimer()
	defer stopVerify()
	for {
		var batch []frame
		select {
		case <-ctx.Done():
			return s, nil
		case <-l.verify:
			return stateVerify{applied: s.rv}, nil
		case <-verifyTick:
			return stateVerify{applied: s.rv}, nil
		case <-idle.C():
			// Nothing for IdleTimeout: the connection may be stalled. A new
			// watch from the same resourceVersion loses nothing.
			l.log.Info("watch idle: replacing it", "resourceVersion", s.rv, "idle", l.opts.IdleTimeout)
			l.update(func(x *Status) { x.IdleRestarts++ })
			return s, nil
		case <-settled:
			settled = nil
			l.succeed()
			continue
		case f := <-frames:
			batch = append(batch, f)
		}
		if !idle.Stop() {
			select {
			case <-idle.C():
			default:
			}
		}
		idle.Reset(l.opts.IdleTimeout)
		// Group commit: take whatever else is already waiting.
	drain:
		for len(batch) < l.opts.BatchLimit && batch[len(batch)-1].err == nil {
			select {
			case f := <-frames:
				batch = append(batch, f)
			default:
				break drain
			}
		}
		as := s
		as.fromList = fromList
		next, n, err := l.apply(ctx, as, batch)
		for _, f := range batch {
			budget.Release(f.weight)
		}
		if err != nil {
			return nil, err
		}
		if got == 0 && n > 0 {
			// Sniffed before the first frame was sent: no race.
			l.update(func(x *Status) { x.Encoding = st.encoding() })
		}
		got += n
		if proving && l.provenByFrames(s, next, n) {
			proving = false
		}
		if _, failed := next.(stateBackoff); n > 0 && !failed {
			l.succeed()
			// After the first frame past a restart, a 410 is an ordinary relist.
			s.goneOrigin = journal.OriginRelist
		}
		if next != nil {
			if proving && servedToEnd(batch, next) {
				// The proving watch's normal end at its short
				// timeoutSeconds (about a second: not a spin).
				l.markSynced(syncedByServed)
				return next, nil
			}
			if w, ok := next.(stateWatch); ok && got == 0 && l.opts.Clock.Since(start) < time.Second {
				// Ended at once with nothing: do not spin.
				return l.fail(w, fmt.Errorf("%w: watch ended immediately", ErrWatch))
			}
			return next, nil
		}
		if rv, _ := l.j.ResourceVersion(); rv != "" {
			s.rv = rv
		}
	}
}

// watchTimeout returns the timeoutSeconds of one watch: WatchTimeout plus
// up to 100% jitter.
func (l *Loop) watchTimeout() time.Duration {
	return wait.Jitter(l.opts.WatchTimeout, 1)
}

// apply commits the events of a batch of frames in one transaction and
// returns the next state when a frame ended the watch (nil to go on), and
// how many frames were events or bookmarks. Each DELETED gets its reason
// first (reason.go); when ctx ends meanwhile nothing is committed and apply
// returns (nil, 0, nil): the watch resumes from the journal's
// resourceVersion. The journal's resourceVersion never goes backwards,
// and a frame that shows the server replaying from scratch ends the watch
// in a relist (replay.go).
func (l *Loop) apply(ctx context.Context, s stateWatch, batch []frame) (state, int, error) {
	var ops []watchOp
	var items []Item
	var types []journal.EventType
	var next state
	n := 0
	for _, f := range batch {
		if f.err != nil {
			switch {
			case isWatchEnd(f.err):
				// The server ended the watch (timeoutSeconds), or the
				// connection ended: resume, as client-go's StreamWatcher.
				next = s.resume()
			default:
				// Bytes that are not a watch frame: a failure like any
				// other, retried from the same resourceVersion.
				next = stateBackoff{next: s.resume(), err: fmt.Errorf("%w: %w: %w", ErrWatch, ErrDecode, f.err)}
			}
			break
		}
		switch f.ev.Type {
		case "ERROR":
			serr := &apierrors.StatusError{ErrStatus: *decodeStatus(f.ev.Object)}
			if isGone(serr) || isCompactedRevision(serr) {
				// The event shape: HTTP 200, then ERROR with a 410 Status
				// (or the compaction revision's 500).
				next = l.gone(s, fmt.Errorf("watch ERROR event: %w", serr))
			} else {
				next = stateBackoff{next: s.resume(), err: fmt.Errorf("%w: ERROR event: %w", ErrWatch, serr)}
			}
		case "BOOKMARK":
			// A bookmark only advances the resume point; it is never journaled.
			if m, ok := bookmarkRV(f.ev.Object); ok {
				ops = append(ops, watchOp{item: -1, rv: m})
			}
			n++
		case "ADDED", "MODIFIED", "DELETED":
			it, err := l.c.eventItem(f.ev)
			if err != nil {
				next = stateBackoff{next: s.resume(), err: fmt.Errorf("%w: %w: %w", ErrWatch, ErrDecode, err)}
				break
			}
			op := watchOp{item: -1, rv: it.ResourceVersion, event: true}
			if l.c.shard.in(it.UID) { // another shard's key moves the resume point only
				op.item = len(items)
				items = append(items, it)
				types = append(types, journal.EventType(f.ev.Type))
			}
			ops = append(ops, op)
			n++
		default:
			l.log.Info("ignoring unknown watch event type", "type", f.ev.Type)
		}
		if next != nil {
			break
		}
	}
	if len(ops) == 0 {
		return next, n, nil
	}
	// Each DELETED's reason, confirmed at its resourceVersion (reason.go).
	reasons := make([]journal.Reason, len(items))
	cf := l.newConfirmer()
	for i, it := range items {
		if types[i] != journal.Deleted {
			continue
		}
		r, err := cf.reason(ctx, it.Key, it.UID, it.ResourceVersion)
		if err != nil {
			cf.done()
			return nil, 0, nil // ctx ended: the caller returns
		}
		reasons[i] = r
	}
	cf.done()
	appended := 0
	var counts TypeCounts
	var rv string
	replayAt := -1
	start := time.Now()
	err := l.w.Update(func(tx *journal.Tx) error {
		appended, counts, rv, replayAt = 0, TypeCounts{}, s.rv, -1
		for i, op := range ops {
			if op.item < 0 {
				if op.event && !s.fromList && atOrBelow(op.rv, rv) {
					replayAt = i
					break
				}
				rv = later(rv, op.rv)
				continue
			}
			it := items[op.item]
			cur, present, err := tx.Lookup(it.Key)
			if err != nil {
				return err
			}
			if !s.fromList && replayed(rv, cur, present, types[op.item], it) {
				replayAt = i
				break
			}
			for _, e := range Fold(cur, present, types[op.item], it) {
				e.Origin = journal.OriginWatch
				if e.Type == journal.Deleted && e.Reason == "" {
					e.Reason = reasons[op.item]
				}
				if _, err := tx.Append(&e); err != nil {
					return err
				}
				appended++
				counts.add(e.Type)
			}
			rv = later(rv, op.rv)
		}
		if rv == s.rv && appended == 0 {
			return nil
		}
		return tx.SetResourceVersion(rv)
	})
	l.committed(start, err)
	if errors.Is(err, journal.ErrNoSpace) {
		// Nothing of the batch was kept: watch again from the last
		// committed resourceVersion once there may be space.
		next, _ := l.fail(s.resume(), fmt.Errorf("%w: %w", ErrJournal, err))
		return next, n, nil
	}
	if err != nil {
		return nil, n, fmt.Errorf("%w: %w", ErrJournal, err)
	}
	if replayAt >= 0 {
		next = l.replay(s, ops[replayAt].rv)
	}
	l.update(func(x *Status) {
		x.ResourceVersion = rv
		x.Events += appended
		x.Journaled.add(journal.OriginWatch, counts)
	})
	if w, ok := next.(stateWatch); ok {
		w.rv = rv
		next = w
	}
	if b, ok := next.(stateBackoff); ok {
		if w, ok := b.next.(stateWatch); ok {
			w.rv = rv
			b.next = w
			next = b
		}
	}
	return next, n, nil
}

// gone records a 410, or the compaction revision's 500 that means the same,
// and returns the relist it leads to.
func (l *Loop) gone(s stateWatch, err error) state {
	msg := "resourceVersion no longer served (410): relisting"
	if isCompactedRevision(err) {
		msg = "resourceVersion is just below etcd's compaction revision: the apiserver answers 500 \"PrevKv=nil\" and will never serve it: relisting"
	}
	l.log.Info(msg, "resourceVersion", s.rv, "origin", string(s.goneOrigin), "error", err)
	l.update(func(x *Status) { x.Gone++ })
	return stateList{origin: s.goneOrigin}
}

// bookmarkRV reads metadata.resourceVersion of a BOOKMARK object, which
// carries no name or uid.
func bookmarkRV(obj []byte) (string, bool) {
	rv, _ := bookmarkEnd(obj)
	return rv, rv != ""
}
