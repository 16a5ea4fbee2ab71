package jcache

import (
	"context"
	"errors"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	toolscache "k8s.io/client-go/tools/cache"

	"github.com/watchjournal/watchjournal/journal"
	"github.com/watchjournal/watchjournal/reconcile"
)

// WithReplayChunk returns o whose cache bounds a replay chunk to n
// objects (testhooks.go).
func WithReplayChunk(o Options, n int) Options {
	o.hooks.replayChunk = n
	return o
}

// WithRetentionInterval returns o whose cache trims a file without
// appends at least every d (testhooks.go).
func WithRetentionInterval(o Options, d time.Duration) Options {
	o.hooks.retentionInterval = d
	return o
}

// WithReadDecodes returns o whose cache adds to n each object a read
// decodes (testhooks.go).
func WithReadDecodes(o Options, n *atomic.Int64) Options {
	o.hooks.readDecodes = n
	return o
}

// feedsIn returns, in the order of their paths, the feeds of the files
// open in dir (of every directory, for "").
func feedsIn(dir string) []*feed {
	registry.mu.Lock()
	var fs []*feed
	for p, f := range registry.feeds {
		if (dir == "" || filepath.Dir(p) == filepath.Clean(dir)) && f.j != nil {
			fs = append(fs, f)
		}
	}
	registry.mu.Unlock()
	slices.SortFunc(fs, func(a, b *feed) int { return strings.Compare(a.path, b.path) })
	return fs
}

// fileIn returns the journal of the one file open in dir; nil when none
// is.
func fileIn(dir string) *journal.Journal {
	fs := feedsIn(dir)
	if len(fs) == 0 {
		return nil
	}
	return fs[len(fs)-1].j
}

// FileOffsets returns the first retained offset and the head of every
// open file in dir, by file name.
func FileOffsets(dir string) (map[string][2]uint64, error) {
	out := map[string][2]uint64{}
	for _, f := range feedsIn(dir) {
		st, err := f.j.Stats()
		if err != nil {
			return nil, err
		}
		out[filepath.Base(f.path)] = [2]uint64{st.FirstOffset, st.LastOffset}
	}
	return out, nil
}

// ModifiedOffsets returns the offsets of the retained MODIFIED events of
// the one open file in dir.
func ModifiedOffsets(dir string) ([]uint64, error) {
	j := fileIn(dir)
	var out []uint64
	for from := uint64(0); ; {
		evs, err := j.Read(from, 1000)
		if err != nil {
			return nil, err
		}
		if len(evs) == 0 {
			return out, nil
		}
		for _, e := range evs {
			if e.Type == journal.Modified {
				out = append(out, e.Offset)
			}
		}
		from = evs[len(evs)-1].Offset + 1
	}
}

// IndexReads returns how many index reads were served by an index kept on
// disk and how many by evaluating the index at read time, since the
// process started.
func IndexReads() (disk, scan int64) { return indexReads.disk.Load(), indexReads.scan.Load() }

// Reindexes waits for the reindex runs started so far
// in the open files of dir (of every directory, for ""), and returns what
// each did, in the order of the files' paths and then of their start.
func Reindexes(ctx context.Context, dir string) ([]journal.ReindexStats, error) {
	var out []journal.ReindexStats
	for _, f := range feedsIn(dir) {
		vs, err := f.reindexes.wait(ctx)
		if err != nil {
			return nil, err
		}
		for _, v := range vs {
			if v.err != nil {
				return nil, v.err
			}
			out = append(out, v.stats)
		}
	}
	return out, nil
}

// NoFinalCommit returns o whose sources do not commit once more when
// their context ends: a SIGKILL-like stop (testhooks.go).
func NoFinalCommit(o ExactOptions) ExactOptions {
	o.hooks.noFinalCommit = true
	return o
}

// StandbyCommitted returns the committed offset of s's consumer in its
// informer's journal on this replica, where s has not started (the
// follower's commits), 0 with no consumer, and the journal's head.
func StandbyCommitted(ctx context.Context, s *ExactSource) (committed, head uint64, err error) {
	inf, err := s.informer(ctx)
	if err != nil {
		return 0, 0, err
	}
	name, _, err := s.ctl.consumerName(inf.f.j, s)
	if err != nil {
		return 0, 0, err
	}
	if head, err = inf.f.j.Head(); err != nil {
		return 0, 0, err
	}
	c, err := inf.f.j.Consumers().Committed(name)
	if errors.Is(err, journal.ErrNoConsumer) {
		return 0, head, nil
	}
	return c, head, err
}

// StandbyConsumers returns the consumers of s's informer's journal on
// this replica, where s may not have started.
func StandbyConsumers(ctx context.Context, s *ExactSource) ([]journal.ConsumerInfo, error) {
	inf, err := s.informer(ctx)
	if err != nil {
		return nil, err
	}
	return inf.f.j.Consumers().List()
}

// NoRetainFinalCommit returns o whose cache does not commit a file's hold
// once more when its feed stops: a SIGKILL-like stop (testhooks.go).
func NoRetainFinalCommit(o Options) Options {
	o.hooks.noRetainFinalCommit = true
	return o
}

// HandlersRecord returns the committed offset of the handlers' consumer
// (RetentionConsumer) and the head of the one open file in dir.
func HandlersRecord(dir string) (committed, head uint64, err error) {
	j := fileIn(dir)
	if j == nil {
		return 0, 0, errors.New("no open file")
	}
	if committed, err = j.Consumers().Committed(RetentionConsumer); err != nil {
		return 0, 0, err
	}
	head, err = j.Head()
	return committed, head, err
}

// WithNewProcessKey returns o whose cache, given no key, seals under a
// process key of its own, as a cache of a restarted process does.
func WithNewProcessKey(o Options) Options {
	o.hooks.processKey = &processKeys{}
	return o
}

// WithExactHooks returns o with the pauses of a source's goroutines:
// trimmed is called by the feed once it marked the consumer for reset
// (retention trimmed past it), before deleting it; commit wraps each
// commit of the committer and must call do once. Nil hooks do nothing.
func WithExactHooks(o ExactOptions, trimmed func(), commit func(p uint64, do func() error) error) ExactOptions {
	o.hooks = exactHooks{trimmed: trimmed, commit: commit}
	return o
}

// WithBeforeReplayHold returns o whose sources call fn in each replay
// between reading the head and creating the replay's hold at it.
func WithBeforeReplayHold(o ExactOptions, fn func(head uint64)) ExactOptions {
	o.hooks.beforeHold = fn
	return o
}

// AbandonShardLease returns o whose cache's shard group leaves its Lease
// behind when its Start returns, as a killed process leaves it: the
// others take its range over when the Lease expires (testhooks.go).
func AbandonShardLease(o Options) Options {
	o.hooks.abandonShardLease = true
	return o
}

// HoldShardGroup returns a hook that makes a cache's shard group wait for
// gate to close before its first renewal, so that the handlers added
// before Start join while the group gives no range (testhooks.go).
func HoldShardGroup(gate <-chan struct{}) func(Options) Options {
	return func(o Options) Options {
		o.hooks.shardGate = gate
		return o
	}
}

// HandlerReplayed reports whether the handler of reg (an informer's
// AddEventHandler) has been given its replay.
func HandlerReplayed(reg toolscache.ResourceEventHandlerRegistration) bool {
	r, ok := reg.(*registration)
	return ok && r.replayed.Load()
}

// CommittedKeys returns the keys the one open file in dir holds in its
// committed state (not the tail of a batch in flight), and its head.
func CommittedKeys(dir string) (keys []string, head uint64, err error) {
	j := fileIn(dir)
	if j == nil {
		return nil, 0, errors.New("no open file")
	}
	err = j.ViewObjects(func(v *journal.ObjectView) error {
		head = v.Head()
		return v.Scan("", func(k string, _ []byte) (bool, error) { keys = append(keys, k); return true, nil })
	})
	return keys, head, err
}

// RangedFile returns the keys the one open ranged file in dir holds
// (feedrange.go), the shard selector it records and its loop's shard
// mode.
func RangedFile(dir string) (keys []string, selector string, mode reconcile.ShardMode, err error) {
	var f *feed
	for _, g := range feedsIn(dir) {
		if g.group != nil {
			f = g
		}
	}
	if f == nil {
		return nil, "", "", errors.New("no open ranged file")
	}
	rec, _, err := f.j.Resource()
	if err != nil {
		return nil, "", "", err
	}
	err = f.j.ViewObjects(func(v *journal.ObjectView) error {
		return v.Scan("", func(k string, _ []byte) (bool, error) { keys = append(keys, k); return true, nil })
	})
	return keys, rec.ShardSelector, f.loop().Status().ShardMode, err
}
