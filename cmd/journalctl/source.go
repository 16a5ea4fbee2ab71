package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"os"
	"slices"
	"strconv"
	"time"

	"github.com/watchjournal/watchjournal/journal"
)

// source reads one journal file for the read-only commands, which do not
// care whether it reads the file itself (fileSource) or asks the watch that
// holds the file's lock (sockSource).
type source interface {
	// Stats returns the file's statistics, as journal.Journal.Stats.
	Stats(ctx context.Context) (journal.Stats, error)
	// Read returns up to limit events from offset from, as journal.Journal.Read;
	// a compacted offset gives a *journal.CompactedError.
	Read(ctx context.Context, from uint64, limit int) ([]journal.Event, error)
	// ScanIndex returns up to limit index entries with keys after after, as
	// journal.Journal.ScanIndex.
	ScanIndex(ctx context.Context, after string, limit int) ([]journal.IndexEntry, error)
	// Head returns the last offset assigned, 0 when none was.
	Head(ctx context.Context) (uint64, error)
	// Wait returns the head once it is past after, or earlier (a socket wait
	// ends after at most 30 s): callers loop.
	Wait(ctx context.Context, after uint64) (uint64, error)
	// Status returns the writer's status, nil when no writer runs.
	Status(ctx context.Context) (*writerStatus, error)
	// Consumers lists the registered consumers in name order, as
	// journal.Journal.Consumers.
	Consumers(ctx context.Context) ([]journal.ConsumerInfo, error)
	// Retention returns the retention the file records, as
	// journal.Journal.Retention.
	Retention(ctx context.Context) (journal.Retention, error)
	// Commit records off as the committed offset of the existing consumer
	// name (commitConsumer). The file source opens the file writable for
	// the commit alone; the socket source asks the watch that holds it.
	Commit(ctx context.Context, name string, off uint64) error
}

// errNoServer is returned when the socket of a watch cannot be reached.
var errNoServer = errors.New("journalctl: no watch serves the file")

// pollInterval is how often a follower without a writer reopens the file:
// bbolt has no cross-process notification. A variable for tests.
var pollInterval = time.Second

// socketPath returns the path of the socket a watch of db serves.
func socketPath(db string) string { return db + ".sock" }

// openSource returns a source for the journal file at path: the file itself
// when a read-only open succeeds, else, when a writer holds the file, the
// socket of the watch that holds it.
func openSource(ctx context.Context, path string) (source, error) {
	f := fileSource{path: path}
	err := f.view(func(*journal.Journal) error { return nil })
	if err == nil {
		return f, nil
	}
	if !errors.Is(err, journal.ErrLocked) {
		return nil, err
	}
	s := newSockSource(socketPath(path))
	if _, serr := s.Head(ctx); serr != nil {
		return nil, fmt.Errorf("%w, and no watch serves %s", err, s.sock)
	}
	return s, nil
}

// handover reports whether err means the file changed hands: a writer took
// the lock (and may not serve its socket yet), or the watch serving it
// stopped. A follower then looks for the file's reader again.
func handover(err error) bool {
	return errors.Is(err, journal.ErrLocked) || errors.Is(err, errNoServer)
}

// fileSource reads the file directly. Each call is one short read-only
// open, read and close: a shared lock held longer would keep a watch from
// starting.
type fileSource struct{ path string }

func (f fileSource) view(fn func(*journal.Journal) error) (err error) {
	j, err := journal.Open(f.path, &journal.Options{ReadOnly: true, Timeout: -1})
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, j.Close()) }()
	return fn(j)
}

func (f fileSource) Stats(context.Context) (st journal.Stats, err error) {
	err = f.view(func(j *journal.Journal) error { st, err = j.Stats(); return err })
	return st, err
}

func (f fileSource) Read(_ context.Context, from uint64, limit int) (evs []journal.Event, err error) {
	err = f.view(func(j *journal.Journal) error { evs, err = j.Read(from, limit); return err })
	return evs, err
}

func (f fileSource) ScanIndex(_ context.Context, after string, limit int) (es []journal.IndexEntry, err error) {
	err = f.view(func(j *journal.Journal) error { es, err = j.ScanIndex(after, limit); return err })
	return es, err
}

func (f fileSource) Head(context.Context) (head uint64, err error) {
	err = f.view(func(j *journal.Journal) error { head, err = j.Head(); return err })
	return head, err
}

// Wait polls the file every pollInterval, reopening it each time.
func (f fileSource) Wait(ctx context.Context, after uint64) (uint64, error) {
	for {
		head, err := f.Head(ctx)
		if err != nil || head > after {
			return head, err
		}
		select {
		case <-ctx.Done():
			return head, ctx.Err()
		case <-time.After(pollInterval):
		}
	}
}

// OffsetAt returns the first retained offset journaled at or after t, as
// journal.Journal.OffsetAt.
func (f fileSource) OffsetAt(_ context.Context, t time.Time) (off uint64, err error) {
	err = f.view(func(j *journal.Journal) error { off, err = j.OffsetAt(t); return err })
	return off, err
}

func (fileSource) Status(context.Context) (*writerStatus, error) { return nil, nil }

func (f fileSource) Consumers(context.Context) (cs []journal.ConsumerInfo, err error) {
	err = f.view(func(j *journal.Journal) error { cs, err = j.Consumers(); return err })
	return cs, err
}

func (f fileSource) Retention(context.Context) (r journal.Retention, err error) {
	err = f.view(func(j *journal.Journal) error { r, err = j.Retention(); return err })
	return r, err
}

// Commit opens the file writable for the commit alone. It waits up to
// journal.Open's default 1 s for readers' shared locks to go; a watch that
// took the file meanwhile makes it fail with journal.ErrLocked.
func (f fileSource) Commit(_ context.Context, name string, off uint64) (err error) {
	j, err := openWritable(f.path)
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, j.Close()) }()
	return commitConsumer(j, name, off)
}

// openWritable opens the existing journal file at path writable, waiting
// up to journal.Open's default 1 s for readers' shared locks to go.
func openWritable(path string) (*journal.Journal, error) {
	// A writable open creates a missing file: make sure there is one.
	if _, err := os.Stat(path); errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("%w: %s", journal.ErrNotExist, path)
	}
	return journal.Open(path, nil)
}

// errCommitRange is returned by commitConsumer for an offset that is not
// between 1 and the head.
var errCommitRange = errors.New("commit offset outside 1 to the head")

// beforeCommit, when set, runs right before the transaction of a commit
// (commitConsumer) or of a consumer's change (applyConsumerChange), with
// the journal it writes. A variable for tests: they delete or create the
// consumer there.
var beforeCommit func(j *journal.Journal)

// commitConsumer records off as the committed offset of consumer name in
// the writable journal j. The check that the consumer exists and the commit
// are one write transaction (journal.Journal.CommitConsumer), so a consumer
// deleted meanwhile is refused, never registered again. It refuses a
// consumer that does not exist (journal.ErrNoConsumer), an offset outside 1
// to the head (errCommitRange) and one below the committed offset
// (journal.ErrCommitBackwards).
func commitConsumer(j *journal.Journal, name string, off uint64) error {
	if off == 0 {
		if _, err := j.ConsumerCommitted(name); err != nil {
			return err // journal.ErrNoConsumer first, as for any offset
		}
		return fmt.Errorf("consumer %q: %w: offset 0", name, errCommitRange)
	}
	if beforeCommit != nil {
		beforeCommit(j)
	}
	err := j.CommitConsumer(name, off)
	if errors.Is(err, journal.ErrOffsetRange) {
		return fmt.Errorf("consumer %q: %w: %w", name, errCommitRange, err)
	}
	return err
}

// findConsumer returns the consumer name of cs, and false when there is none.
func findConsumer(cs []journal.ConsumerInfo, name string) (journal.ConsumerInfo, bool) {
	i := slices.IndexFunc(cs, func(c journal.ConsumerInfo) bool { return c.Name == name })
	if i < 0 {
		return journal.ConsumerInfo{}, false
	}
	return cs[i], true
}

// sockSource asks a running watch over its unix socket (server.go).
type sockSource struct {
	sock string
	c    *http.Client
}

func newSockSource(sock string) *sockSource {
	dial := func(ctx context.Context, _, _ string) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, "unix", sock)
	}
	return &sockSource{sock: sock, c: &http.Client{Transport: &http.Transport{DialContext: dial}}}
}

// get fetches path?q and decodes the JSON answer into v. An error answer
// becomes an error; a compacted offset a *journal.CompactedError.
func (s *sockSource) get(ctx context.Context, path string, q url.Values, v any) error {
	return s.do(ctx, http.MethodGet, path, q, v)
}

// do sends a request with method to path?q and decodes the JSON answer
// into v, as get.
func (s *sockSource) do(ctx context.Context, method, path string, q url.Values, v any) error {
	req, err := http.NewRequestWithContext(ctx, method, "http://journal"+path+"?"+q.Encode(), nil)
	if err != nil {
		return err
	}
	resp, err := s.c.Do(req)
	if err != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		return fmt.Errorf("%w: %s: %v", errNoServer, s.sock, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		var e jsonError
		if err := json.NewDecoder(resp.Body).Decode(&e); err != nil {
			return fmt.Errorf("journalctl: %s: %s", path, resp.Status)
		}
		if e.Compacted != nil {
			return (*journal.CompactedError)(e.Compacted)
		}
		return errors.New(e.Error)
	}
	if err := json.NewDecoder(resp.Body).Decode(v); err != nil {
		return fmt.Errorf("journalctl: decode %s: %w", path, err)
	}
	return nil
}

func (s *sockSource) Stats(ctx context.Context) (journal.Stats, error) {
	var st jsonStats
	err := s.get(ctx, "/stats", nil, &st)
	return st.stats(), err
}

func (s *sockSource) Read(ctx context.Context, from uint64, limit int) ([]journal.Event, error) {
	var jevs []jsonEvent
	q := url.Values{"from": {strconv.FormatUint(from, 10)}, "limit": {strconv.Itoa(limit)}}
	if err := s.get(ctx, "/events", q, &jevs); err != nil {
		return nil, err
	}
	evs := make([]journal.Event, len(jevs))
	for i, je := range jevs {
		evs[i] = je.event()
	}
	return evs, nil
}

func (s *sockSource) ScanIndex(ctx context.Context, after string, limit int) ([]journal.IndexEntry, error) {
	var jes []jsonIndexEntry
	q := url.Values{"after": {after}, "limit": {strconv.Itoa(limit)}}
	if err := s.get(ctx, "/index", q, &jes); err != nil {
		return nil, err
	}
	es := make([]journal.IndexEntry, len(jes))
	for i, je := range jes {
		es[i] = journal.IndexEntry(je)
	}
	return es, nil
}

func (s *sockSource) Head(ctx context.Context) (uint64, error) {
	var h jsonHead
	err := s.get(ctx, "/head", nil, &h)
	return h.Head, err
}

func (s *sockSource) Wait(ctx context.Context, after uint64) (uint64, error) {
	var h jsonHead
	err := s.get(ctx, "/wait", url.Values{"after": {strconv.FormatUint(after, 10)}}, &h)
	return h.Head, err
}

func (s *sockSource) Status(ctx context.Context) (*writerStatus, error) {
	var st writerStatus
	if err := s.get(ctx, "/status", nil, &st); err != nil {
		return nil, err
	}
	return &st, nil
}

func (s *sockSource) Consumers(ctx context.Context) ([]journal.ConsumerInfo, error) {
	var jcs []jsonConsumer
	if err := s.get(ctx, "/consumers", nil, &jcs); err != nil {
		return nil, err
	}
	cs := make([]journal.ConsumerInfo, len(jcs))
	for i, jc := range jcs {
		cs[i] = journal.ConsumerInfo(jc)
	}
	return cs, nil
}

func (s *sockSource) Retention(ctx context.Context) (journal.Retention, error) {
	var jr jsonRetention
	if err := s.get(ctx, "/retention", nil, &jr); err != nil {
		return journal.Retention{}, err
	}
	return jr.retention()
}

func (s *sockSource) Commit(ctx context.Context, name string, off uint64) error {
	var jc jsonConsumer
	path := "/consumers/" + url.PathEscape(name) + "/commit"
	return s.do(ctx, http.MethodPost, path, url.Values{"offset": {strconv.FormatUint(off, 10)}}, &jc)
}

var (
	_ source = fileSource{}
	_ source = (*sockSource)(nil)
)
