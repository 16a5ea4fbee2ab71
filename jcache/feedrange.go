package jcache

// Ranged feeds: the file of a sharded resource named in
// ShardOptions.Owners journals only the replica's range H of the shard
// group, so that each replica lists, watches, stores and reads only its
// share.
//
// Invariant: while a loop writes the file, the file is bound to H as the
// group last gave it (journal.Resource.ShardSelector), and the loop keeps
// to it: the apiserver filters by shardSelector where it serves it, the
// loop drops the rest otherwise (package reconcile, shard.go). A file
// holds only keys whose own UID hashes into the range it records.
//
// States of a ranged feed, owned by follow's goroutine:
//
//	idle      H = ∅ (joining, lost, leaving): no loop runs; the file keeps
//	          what it held, and the handlers are given none of it
//	          (shardfilter.go)
//	running   a loop journals the range the file records, which is H
//	moving    H changed: the loop is stopped, Reshard binds the file to
//	          the new H, and a new loop runs (setLoop; waiters follow it:
//	          feed.waitFor, feed.waitForSync)
//
// A Reshard journals each key that leaves as DELETED, reason moved: the
// handlers skip it (shardFilter.skip), so a key that moves away is no
// OnDelete, and catch-up skips it too (catchup.go). A range that grows is
// recorded as pending and the resourceVersion cleared, so the new loop
// lists: the keys that entered are ADDED (reason moved), which the
// handlers get as OnAdd once their filter holds the range. The pending
// part is cleared once the new loop has synced.
//
// The file is named apart from the whole resource's (rangedPath), per
// group, so that a resource that stops being ranged does not reopen a
// file that lacks part of it, and the first open of the file records no
// range: the loop built at open does not run until the group gives a
// range, and is replaced (after a Run with a done context, so that its
// waiters move on) when the file must be bound to another one first.
//
// Reads of a ranged resource (Get, List) see only the file: the objects
// this replica holds.

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/watchjournal/watchjournal/internal/hashrange"
	"github.com/watchjournal/watchjournal/journal"
	"github.com/watchjournal/watchjournal/journal/inspect"
	"github.com/watchjournal/watchjournal/reconcile"
)

// rangedPath is the file of a ranged feed of group g beside path, the
// whole resource's file: "<base>.shard-<group>.db".
func rangedPath(path string, g *shardGroup) string {
	return strings.TrimSuffix(path, ".db") + ".shard-" + g.o.Group + ".db"
}

// recordedShard returns the shard selector the file at path records ("",
// the whole space, when it does not exist or records none).
func recordedShard(path string, o *Options) (string, error) {
	if _, err := os.Stat(path); errors.Is(err, os.ErrNotExist) {
		return "", nil
	}
	j, err := journal.Open(path, &journal.Options{Logger: o.Logger, NoSync: o.NoSync, Keyring: o.Keyring, SealResources: o.SealResources})
	if err != nil {
		return "", err
	}
	rec, _, err := j.Resource()
	if cerr := j.Close(); err == nil {
		err = cerr
	}
	return rec.ShardSelector, err
}

// runningLoop is a loop follow runs.
type runningLoop struct {
	cancel context.CancelFunc
	done   chan error // Run's error, once
	wg     sync.WaitGroup
}

// stop stops the loop and returns its Run's error.
func (r *runningLoop) stop() error {
	r.cancel()
	err := <-r.done
	r.wg.Wait()
	return err
}

// follow runs the file's loops until ctx is done, moving the file to each
// range the group gives (this file's comment). It returns a loop's fatal
// error (reconcile.ErrJournal, ErrRejected) or a Reshard's.
func (f *feed) follow(ctx context.Context) error {
	var (
		at  hashrange.Set // the range the running loop journals
		cur *runningLoop  // nil: idle
		ran bool          // f.loop() has run (else it must be retired before another replaces it)
	)
	defer func() {
		if !ran {
			f.retire(f.loop())
		}
	}()
	for {
		next, _, changed := f.group.current()
		if cur == nil || !next.Equal(at) {
			f.moving.Store(cur != nil && !next.Empty())
			if cur != nil {
				f.group.fileSynced(f, nil, false)
				if err := cur.stop(); err != nil {
					return err
				}
				cur = nil
			}
			if !next.Empty() {
				if err := f.bind(next, ran); err != nil {
					return err
				}
				cur, ran = f.run(ctx, next), true
			}
			at = next
		}
		var done chan error
		if cur != nil {
			done = cur.done
		}
		select {
		case <-ctx.Done():
			if cur != nil {
				return cur.stop()
			}
			return nil
		case <-changed:
		case err := <-done: // Run returned: a fatal error, or ctx ended
			cur.cancel()
			cur.wg.Wait()
			return err
		}
	}
}

// bind makes the file record the range next and the current loop one
// that has not run, with no loop running: a Reshard when the file records
// another range, then a new loop at it unless the current one (ran: it
// has run) can still run. A loop replaced before it ran is retired.
func (f *feed) bind(next hashrange.Set, ran bool) error {
	rec, _, err := f.j.Resource()
	if err != nil {
		return fmt.Errorf("jcache: %s: %w", f.res, err)
	}
	if rec.ShardSelector == next.Selector() && !ran {
		return nil // the loop built at open journals next
	}
	if rec.ShardSelector != next.Selector() {
		r, err := f.j.Writer().Reshard(next.Selector())
		if err != nil {
			return fmt.Errorf("jcache: %s: %w", f.res, err)
		}
		f.opts.Logger.Info("cache file moved to the shard range", "resource", f.res.String(),
			"share", fmt.Sprintf("%.1f%%", 100*next.Share()), "left", r.Left)
	}
	l, err := f.newLoop(f.j)
	if err != nil {
		return err
	}
	old := f.loop()
	f.setLoop(l)
	if !ran {
		f.retire(old)
	}
	return nil
}

// retire runs l, which never ran, with a done context: its Run returns at
// once, so whoever waits on it (WaitForSync: ErrStopped) moves on.
func (f *feed) retire(l *reconcile.Loop) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_ = l.Run(ctx)
}

// run starts the current loop, which journals the range at, and, once it
// has synced, clears the file's pending range (its list has committed)
// and tells the group the file holds at.
func (f *feed) run(ctx context.Context, at hashrange.Set) *runningLoop {
	l := f.loop()
	lctx, cancel := context.WithCancel(ctx)
	r := &runningLoop{cancel: cancel, done: make(chan error, 1)}
	// Run ends with lctx, or on a fatal error; the other goroutine when
	// the loop syncs or lctx is done.
	go func() { r.done <- l.Run(lctx) }()
	r.wg.Go(func() {
		if l.WaitForSync(lctx) != nil {
			return
		}
		if p, err := f.j.Writer().ShardPending(); err == nil && p != "" {
			if err := f.j.Writer().ClearShardPending(); err != nil && lctx.Err() == nil {
				f.opts.Logger.Error(err, "could not clear the cache file's pending shard range", "resource", f.res.String())
			}
		}
		f.moving.Store(false)
		f.servedOnce.Store(true)
		f.group.fileSynced(f, at, false)
	})
	return r
}

// ready is the readiness of the loop that writes the file
// (reconcile.Loop.Ready). A ranged feed that moves from one range to
// another (after a loop at the old one synced) stays ready while the new
// loop lists, unless it fails for longer than failingBound: a membership
// change moves every replica's range at once, and a rollout that adds a
// replica must not see every other one unready.
func (f *feed) ready(failingBound time.Duration) error {
	l := f.loop()
	err := l.Ready(failingBound)
	if err == nil || f.group == nil || !f.moving.Load() || l.Alive() != nil {
		return err
	}
	if failingBound <= 0 {
		failingBound = reconcile.DefaultFailingBound
	}
	if st := l.Status(); st.LastError != nil && time.Since(st.FailingSince) > failingBound {
		return err
	}
	return nil
}

// alive is the liveness of the loop that writes the file
// (reconcile.Loop.Alive); for a ranged feed also nil unless follow
// stopped on an error (a Reshard's).
func (f *feed) alive() error {
	if err := f.loop().Alive(); err != nil || f.group == nil {
		return err
	}
	registry.mu.Lock()
	defer registry.mu.Unlock()
	return f.runErr
}

// liveLoop serves the inspect socket from whichever loop writes the file
// now.
type liveLoop struct{ f *feed }

func (l liveLoop) InspectStatus() inspect.LoopStatus { return l.f.loop().InspectStatus() }
func (l liveLoop) Verify()                           { l.f.loop().Verify() }
func (l liveLoop) WaitForInspect(ctx context.Context, cond func(inspect.LoopStatus) bool) error {
	return l.f.onLoop(ctx, func(ctx context.Context, lp *reconcile.Loop) error { return lp.WaitForInspect(ctx, cond) })
}
