package inspect

// Consumer writes: a commit (POST /consumers/{name}/commit) and a create,
// reset or delete (POST /consumers/{name}/change). They are the only
// requests that change the journal. The same functions serve a program
// that holds the file writable itself (journalctl opens it for one change
// when no writer runs), so the checks are written once.

import (
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"time"

	"github.com/watchjournal/watchjournal/journal"
)

// errCommitRange is returned by CommitConsumer for an offset that is not
// between 1 and the head.
var errCommitRange = errors.New("commit offset outside 1 to the head")

// errConsumerExists is returned by a create for a consumer that exists.
var errConsumerExists = errors.New("consumer exists")

// CommitConsumer records off as the committed offset of consumer name in
// the writable journal j. The check that the consumer exists and the commit
// are one write transaction (journal.Consumers.Commit), so a consumer
// deleted meanwhile is refused, never registered again. It refuses a
// consumer that does not exist (journal.ErrNoConsumer), an offset outside 1
// to the head and one below the committed offset
// (journal.ErrCommitBackwards).
func CommitConsumer(j *journal.Journal, name string, off uint64) error {
	return commitConsumer(j, name, off, nil)
}

// commitConsumer is CommitConsumer; before, when not nil, runs right
// before the commit's transaction (testHooks.beforeCommit).
func commitConsumer(j *journal.Journal, name string, off uint64, before func(*journal.Journal)) error {
	if off == 0 {
		if _, err := j.Consumers().Committed(name); err != nil {
			return err // journal.ErrNoConsumer first, as for any offset
		}
		return fmt.Errorf("consumer %q: %w: offset 0", name, errCommitRange)
	}
	if before != nil {
		before(j)
	}
	err := j.Consumers().Commit(name, off)
	if errors.Is(err, journal.ErrOffsetRange) {
		return fmt.Errorf("consumer %q: %w: %w", name, errCommitRange, err)
	}
	return err
}

// ConsumerChange is one change to a consumer. A position (create and
// reset) is the offset the consumer reads next, set as committed offset
// minus one: offset N (>= 1), the first event at or after a time, the head
// (only new events) or, for create with none given, the first retained
// event (journal.Consumers.Open's default).
type ConsumerChange struct {
	// Op is "create", "reset" or "delete".
	Op   string
	Name string
	// Offset > 0 is the offset read next; At, when not zero, a time; Head
	// the head. At most one is set.
	Offset uint64
	At     time.Time
	Head   bool
}

// query returns c as the socket's query parameters.
func (c ConsumerChange) query() url.Values {
	q := url.Values{"op": {c.Op}}
	if c.Offset > 0 {
		q.Set("offset", strconv.FormatUint(c.Offset, 10))
	}
	if !c.At.IsZero() {
		q.Set("time", c.At.Format(time.RFC3339Nano))
	}
	if c.Head {
		q.Set("head", "true")
	}
	return q
}

// parseConsumerChange reads a change from the socket's request.
func parseConsumerChange(r *http.Request) (ConsumerChange, error) {
	q := r.URL.Query()
	c := ConsumerChange{Op: q.Get("op"), Name: r.PathValue("name"), Head: q.Get("head") == "true"}
	var err error
	if c.Offset, err = uintParam(r, "offset"); err != nil {
		return c, err
	}
	if t := q.Get("time"); t != "" {
		if c.At, err = time.Parse(time.RFC3339Nano, t); err != nil {
			return c, fmt.Errorf("bad time %q", t)
		}
	}
	return c, nil
}

// ChangeConsumer makes change c in the writable journal j and returns the
// consumer after it (zero after a delete). It refuses a create of a
// consumer that exists, a reset or delete of one that does not
// (journal.ErrNoConsumer), and a position below the first retained event
// (trimmed by retention) or past the head + 1.
func ChangeConsumer(j *journal.Journal, c ConsumerChange) (journal.ConsumerInfo, error) {
	return changeConsumer(j, c, nil)
}

// changeConsumer is ChangeConsumer; before, when not nil, runs right
// before the change's transaction (testHooks.beforeCommit).
func changeConsumer(j *journal.Journal, c ConsumerChange, before func(*journal.Journal)) (journal.ConsumerInfo, error) {
	_, err := j.Consumers().Committed(c.Name)
	exists := err == nil
	if err != nil && !errors.Is(err, journal.ErrNoConsumer) {
		return journal.ConsumerInfo{}, err
	}
	switch c.Op {
	case "create":
		if exists {
			return journal.ConsumerInfo{}, fmt.Errorf("%w: %q; consumers reset moves it", errConsumerExists, c.Name)
		}
	case "reset", "delete":
		if !exists {
			return journal.ConsumerInfo{}, fmt.Errorf("%w: %q (consumers create registers one)", journal.ErrNoConsumer, c.Name)
		}
	default:
		return journal.ConsumerInfo{}, fmt.Errorf("unknown consumer change %q", c.Op)
	}
	if c.Op == "delete" {
		return journal.ConsumerInfo{}, j.Consumers().Delete(c.Name)
	}
	next, err := nextOffset(j, c)
	if err != nil {
		return journal.ConsumerInfo{}, err
	}
	if before != nil {
		before(j)
	}
	// Each change checks the consumer in its own transaction again: a
	// consumer created meanwhile is not moved by a create, one deleted
	// meanwhile is not registered again by a reset.
	switch {
	case c.Op == "create":
		err = j.Consumers().Create(c.Name, next)
		if errors.Is(err, journal.ErrConsumerExists) {
			err = fmt.Errorf("%w: %q; consumers reset moves it", errConsumerExists, c.Name)
		}
	case next > 0:
		err = j.Consumers().Reset(c.Name, next-1)
	}
	if err != nil {
		return journal.ConsumerInfo{}, err
	}
	cs, err := j.Consumers().List()
	info, _ := findConsumer(cs, c.Name)
	return info, err
}

// nextOffset returns the offset c's consumer reads next, 0 for the
// default of create, checked against the retained range.
func nextOffset(j *journal.Journal, c ConsumerChange) (uint64, error) {
	st, err := j.Stats()
	if err != nil {
		return 0, err
	}
	head, first := st.LastOffset, st.FirstOffset
	if first == 0 {
		first = head + 1
	}
	switch next := c.Offset; {
	case c.Head:
		return head + 1, nil
	case !c.At.IsZero():
		return j.OffsetAt(c.At)
	case next == 0:
		return 0, nil
	case next < first:
		return 0, fmt.Errorf("offset %d was trimmed by retention: the first retained offset is %d", next, first)
	case next > head+1:
		return 0, fmt.Errorf("offset %d is past the head: the last event has offset %d, the next will have %d", next, head, head+1)
	}
	return c.Offset, nil
}

// findConsumer returns the consumer name of cs, and false when there is none.
func findConsumer(cs []journal.ConsumerInfo, name string) (journal.ConsumerInfo, bool) {
	i := slices.IndexFunc(cs, func(c journal.ConsumerInfo) bool { return c.Name == name })
	if i < 0 {
		return journal.ConsumerInfo{}, false
	}
	return cs[i], true
}

// commit answers POST /consumers/{name}/commit.
func (s *server) commit(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("name")
	off, err := uintParam(r, "offset") // a missing offset is 0: out of range
	if err != nil {
		writeJSON(w, http.StatusBadRequest, jsonError{Error: err.Error()})
		return
	}
	switch err := commitConsumer(s.j, name, off, s.hooks.beforeCommit); {
	case errors.Is(err, journal.ErrNoConsumer):
		writeJSON(w, http.StatusNotFound, jsonError{Error: err.Error()})
	case errors.Is(err, errCommitRange):
		writeJSON(w, http.StatusBadRequest, jsonError{Error: err.Error()})
	case err != nil:
		reply(w, nil, err)
	default:
		cs, err := s.j.Consumers().List()
		c, _ := findConsumer(cs, name)
		reply(w, Consumer(c), err)
	}
}

// change answers POST /consumers/{name}/change.
func (s *server) change(w http.ResponseWriter, r *http.Request) {
	c, err := parseConsumerChange(r)
	if err != nil {
		writeJSON(w, http.StatusBadRequest, jsonError{Error: err.Error()})
		return
	}
	info, err := changeConsumer(s.j, c, s.hooks.beforeCommit)
	if err != nil {
		writeJSON(w, http.StatusBadRequest, jsonError{Error: err.Error()})
		return
	}
	writeJSON(w, http.StatusOK, Consumer(info))
}
