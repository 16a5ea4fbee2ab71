package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/watchjournal/watchjournal/journal"
	"github.com/watchjournal/watchjournal/journal/inspect"
)

// source reads one journal file for the read-only commands, which do not
// care whether it reads the file itself (fileSource) or asks the watch that
// holds the file's lock (an *inspect.Client on its socket). Each method is
// journal.Journal's or inspect.Client's of the same name (ChangeConsumer:
// inspect.ChangeConsumer; consumers_change.go); a trimmed offset gives a
// *journal.TrimmedError.
type source interface {
	Stats(ctx context.Context) (journal.Stats, error)
	Read(ctx context.Context, from uint64, limit int) ([]journal.Event, error)
	ScanIndex(ctx context.Context, after string, limit int) ([]journal.IndexEntry, error)
	Head(ctx context.Context) (uint64, error)
	// Wait returns the head once it is past after, or earlier (a socket wait
	// ends after at most 30 s): callers loop.
	Wait(ctx context.Context, after uint64) (uint64, error)
	// Status returns the writer's status, nil when no writer runs.
	Status(ctx context.Context) (*inspect.Status, error)
	Consumers(ctx context.Context) ([]journal.ConsumerInfo, error)
	Retention(ctx context.Context) (journal.Retention, error)
	// Commit records off as the committed offset of the existing consumer
	// name (inspect.CommitConsumer). The file source opens the file writable for
	// the commit alone; the socket source asks the watch that holds it.
	Commit(ctx context.Context, name string, off uint64) error
	ChangeConsumer(ctx context.Context, c inspect.ConsumerChange) (journal.ConsumerInfo, error)
}

// openSource returns a source for the journal file at path: the file itself
// when a read-only open succeeds, else, when a writer holds the file, the
// socket of the watch that holds it. The file source opens sealed objects
// with the keyring ctx carries (withKeyring); the watch opens them with its
// own. Its Wait, when it reads the file, polls every
// defaultSettings().pollInterval: the commands that follow use
// openSourceEvery.
func openSource(ctx context.Context, path string) (source, error) {
	return openSourceEvery(ctx, path, defaultSettings().pollInterval)
}

// openSourceEvery is openSource whose file source polls the file every
// poll (> 0) in Wait.
func openSourceEvery(ctx context.Context, path string, poll time.Duration) (source, error) {
	f := fileSource{path: path, keys: keyringFrom(ctx), poll: poll}
	err := f.view(func(*journal.Journal) error { return nil })
	if err == nil {
		return f, nil
	}
	if !errors.Is(err, journal.ErrLocked) {
		return nil, err
	}
	s := inspect.NewClient(inspect.SocketPath(path))
	if _, serr := s.Head(ctx); serr != nil {
		return nil, fmt.Errorf("%w, and no watch serves %s", err, s.Socket())
	}
	return s, nil
}

// handover reports whether err means the file changed hands: a writer took
// the lock (and may not serve its socket yet), or the watch serving it
// stopped. A follower then looks for the file's reader again.
func handover(err error) bool {
	return errors.Is(err, journal.ErrLocked) || errors.Is(err, inspect.ErrNoServer)
}

// fileSource reads the file directly. Each call is one short read-only
// open, read and close: a shared lock held longer would keep a watch from
// starting. keys opens sealed objects (nil: none); Wait reopens the file
// every poll.
type fileSource struct {
	path string
	keys *journal.Keyring
	poll time.Duration
}

func (f fileSource) view(fn func(*journal.Journal) error) error {
	return withJournal(f.path, &journal.Options{ReadOnly: true, Timeout: -1, Keyring: f.keys}, fn)
}

// viewValue returns what read returns from f's journal, in one f.view.
func viewValue[T any](f fileSource, read func(*journal.Journal) (T, error)) (v T, err error) {
	err = f.view(func(j *journal.Journal) error { v, err = read(j); return err })
	return v, err
}

// update opens the existing file writable for fn alone, waiting up to
// journal.Open's default 1 s for readers' shared locks to go; a watch that
// took the file meanwhile makes it fail with journal.ErrLocked.
func (f fileSource) update(fn func(*journal.Journal) error) error {
	// A writable open creates a missing file: make sure there is one.
	if _, err := os.Stat(f.path); errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("%w: %s", journal.ErrNotExist, f.path)
	}
	return withJournal(f.path, nil, fn)
}

// withJournal opens the journal at path with opts, calls fn and closes it.
func withJournal(path string, opts *journal.Options, fn func(*journal.Journal) error) (err error) {
	j, err := journal.Open(path, opts)
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, j.Close()) }()
	return fn(j)
}

func (f fileSource) Stats(context.Context) (journal.Stats, error) {
	return viewValue(f, (*journal.Journal).Stats)
}

func (f fileSource) Read(_ context.Context, from uint64, limit int) ([]journal.Event, error) {
	return viewValue(f, func(j *journal.Journal) ([]journal.Event, error) { return j.Read(from, limit) })
}

func (f fileSource) ScanIndex(_ context.Context, after string, limit int) ([]journal.IndexEntry, error) {
	return viewValue(f, func(j *journal.Journal) ([]journal.IndexEntry, error) { return j.ScanIndex(after, limit) })
}

func (f fileSource) Head(context.Context) (uint64, error) {
	return viewValue(f, (*journal.Journal).Head)
}

// Wait polls the file every f.poll, reopening it each time.
func (f fileSource) Wait(ctx context.Context, after uint64) (head uint64, err error) {
	if werr := wait.PollUntilContextCancel(ctx, f.poll, true, func(ctx context.Context) (bool, error) {
		head, err = f.Head(ctx)
		return err != nil || head > after, nil
	}); werr != nil {
		return head, werr
	}
	return head, err
}

// OffsetAt returns the first retained offset journaled at or after t, as
// journal.Journal.OffsetAt.
func (f fileSource) OffsetAt(_ context.Context, t time.Time) (uint64, error) {
	return viewValue(f, func(j *journal.Journal) (uint64, error) { return j.OffsetAt(t) })
}

func (fileSource) Status(context.Context) (*inspect.Status, error) { return nil, nil }

func (f fileSource) Consumers(context.Context) ([]journal.ConsumerInfo, error) {
	return viewValue(f, func(j *journal.Journal) ([]journal.ConsumerInfo, error) { return j.Consumers().List() })
}

func (f fileSource) Retention(context.Context) (journal.Retention, error) {
	return viewValue(f, func(j *journal.Journal) (journal.Retention, error) { return j.Settings().Retention() })
}

// Commit opens the file writable for the commit alone (update).
func (f fileSource) Commit(_ context.Context, name string, off uint64) error {
	return f.update(func(j *journal.Journal) error { return inspect.CommitConsumer(j, name, off) })
}

var (
	_ source = fileSource{}
	_ source = (*inspect.Client)(nil)
)
