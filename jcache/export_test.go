package jcache

import (
	"context"
	"errors"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/watchjournal/watchjournal/journal"
)

// SetReplayChunk sets the replay's chunk size in objects, for tests; it
// returns a function that restores it.
func SetReplayChunk(n int) (restore func()) {
	old := replayChunk
	replayChunk = n
	return func() { replayChunk = old }
}

// SetRetentionInterval sets the longest time between two trims of a file
// without appends, for tests; it returns a function that restores it.
func SetRetentionInterval(d time.Duration) (restore func()) {
	old := retentionInterval
	retentionInterval = d
	return func() { retentionInterval = old }
}

// FileOffsets returns the first retained offset and the head of every
// open file in dir, by file name.
func FileOffsets(dir string) (map[string][2]uint64, error) {
	registry.mu.Lock()
	var fs []*feed
	for p, f := range registry.feeds {
		if filepath.Dir(p) == filepath.Clean(dir) && f.j != nil {
			fs = append(fs, f)
		}
	}
	registry.mu.Unlock()
	out := map[string][2]uint64{}
	for _, f := range fs {
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
	registry.mu.Lock()
	var j *journal.Journal
	for p, f := range registry.feeds {
		if filepath.Dir(p) == filepath.Clean(dir) && f.j != nil {
			j = f.j
		}
	}
	registry.mu.Unlock()
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
	registry.mu.Lock()
	var fs []*feed
	for p, f := range registry.feeds {
		if (dir == "" || filepath.Dir(p) == filepath.Clean(dir)) && f.j != nil {
			fs = append(fs, f)
		}
	}
	registry.mu.Unlock()
	slices.SortFunc(fs, func(a, b *feed) int { return strings.Compare(a.path, b.path) })
	var out []journal.ReindexStats
	for _, f := range fs {
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

// SetExactFinalCommit sets whether an Exact source commits once more when
// its context ends (false: a SIGKILL-like stop), for tests; it returns a
// function that restores it.
func SetExactFinalCommit(v bool) (restore func()) {
	old := exactFinalCommit
	exactFinalCommit = v
	return func() { exactFinalCommit = old }
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
	c, err := inf.f.j.ConsumerCommitted(name)
	if errors.Is(err, journal.ErrNoConsumer) {
		return 0, head, nil
	}
	return c, head, err
}

// SetRetainFinalCommit sets whether a file's hold is committed once more
// when its feed stops (false: a SIGKILL-like stop), for tests; it returns
// a function that restores it.
func SetRetainFinalCommit(v bool) (restore func()) {
	old := retainFinalCommit
	retainFinalCommit = v
	return func() { retainFinalCommit = old }
}

// HandlersRecord returns the committed offset of the handlers' consumer
// (RetentionConsumer) and the head of the one open file in dir.
func HandlersRecord(dir string) (committed, head uint64, err error) {
	registry.mu.Lock()
	var j *journal.Journal
	for p, f := range registry.feeds {
		if filepath.Dir(p) == filepath.Clean(dir) && f.j != nil {
			j = f.j
		}
	}
	registry.mu.Unlock()
	if j == nil {
		return 0, 0, errors.New("no open file")
	}
	if committed, err = j.ConsumerCommitted(RetentionConsumer); err != nil {
		return 0, 0, err
	}
	head, err = j.Head()
	return committed, head, err
}

// ResetProcessKey forgets the process's sealing key, as a restart does:
// the next cache given no key makes a new one.
func ResetProcessKey() {
	processKey.once = sync.Once{}
	processKey.ring, processKey.err = nil, nil
}

// CommittedKeys returns the keys the one open file in dir holds in its
// committed state (not the tail of a batch in flight), and its head.
func CommittedKeys(dir string) (keys []string, head uint64, err error) {
	registry.mu.Lock()
	var j *journal.Journal
	for p, f := range registry.feeds {
		if filepath.Dir(p) == filepath.Clean(dir) && f.j != nil {
			j = f.j
		}
	}
	registry.mu.Unlock()
	if j == nil {
		return nil, 0, errors.New("no open file")
	}
	err = j.ViewObjects(func(v *journal.ObjectView) error {
		head = v.Head()
		return v.Scan("", func(k string, _ []byte) (bool, error) { keys = append(keys, k); return true, nil })
	})
	return keys, head, err
}
