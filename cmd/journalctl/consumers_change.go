package main

// consumers create, reset and delete: an SRE manages a durable consumer
// from the CLI. With no watch running the file is opened writable for the
// change alone; a running watch makes the change through its socket
// (POST /consumers/{name}/change), as events --commit does.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/spf13/cobra"

	"github.com/watchjournal/watchjournal/journal"
)

// consumerChange is one change to a consumer. A position (create and
// reset) is the offset the consumer reads next, set as committed offset
// minus one: offset N (>= 1), the first event at or after a time, the head
// (only new events) or, for create with none given, the first retained
// event (journal.Journal.Consumer's default).
type consumerChange struct {
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
func (c consumerChange) query() url.Values {
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
func parseConsumerChange(r *http.Request) (consumerChange, error) {
	q := r.URL.Query()
	c := consumerChange{Op: q.Get("op"), Name: r.PathValue("name"), Head: q.Get("head") == "true"}
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

// errConsumerExists is returned by create for a consumer that exists.
var errConsumerExists = errors.New("consumer exists")

// applyConsumerChange makes change c in the writable journal j and returns
// the consumer after it (zero after a delete). It refuses a position below
// the first retained event (trimmed by retention) or past the head + 1.
func applyConsumerChange(j *journal.Journal, c consumerChange) (journal.ConsumerInfo, error) {
	_, err := j.ConsumerCommitted(c.Name)
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
		return journal.ConsumerInfo{}, j.DeleteConsumer(c.Name)
	}
	next, err := nextOffset(j, c)
	if err != nil {
		return journal.ConsumerInfo{}, err
	}
	if beforeCommit != nil {
		beforeCommit(j)
	}
	// Each change checks the consumer in its own transaction again: a
	// consumer created meanwhile is not moved by a create, one deleted
	// meanwhile is not registered again by a reset.
	switch {
	case c.Op == "create":
		err = j.CreateConsumer(c.Name, next)
		if errors.Is(err, journal.ErrConsumerExists) {
			err = fmt.Errorf("%w: %q; consumers reset moves it", errConsumerExists, c.Name)
		}
	case next > 0:
		err = j.ResetConsumer(c.Name, next-1)
	}
	if err != nil {
		return journal.ConsumerInfo{}, err
	}
	cs, err := j.Consumers()
	info, _ := findConsumer(cs, c.Name)
	return info, err
}

// nextOffset returns the offset c's consumer reads next, 0 for the
// default of create, checked against the retained range.
func nextOffset(j *journal.Journal, c consumerChange) (uint64, error) {
	st, err := j.Stats()
	if err != nil {
		return 0, err
	}
	head := st.LastOffset
	first := st.FirstOffset
	if first == 0 {
		first = head + 1
	}
	var next uint64
	switch {
	case c.Head:
		return head + 1, nil
	case !c.At.IsZero():
		return j.OffsetAt(c.At)
	case c.Offset > 0:
		next = c.Offset
	default:
		return 0, nil
	}
	if next < first {
		return 0, fmt.Errorf("offset %d was trimmed by retention: the first retained offset is %d", next, first)
	}
	if next > head+1 {
		return 0, fmt.Errorf("offset %d is past the head: the last event has offset %d, the next will have %d", next, head, head+1)
	}
	return next, nil
}

// changeConsumer answers POST /consumers/{name}/change.
func (s *server) changeConsumer(w http.ResponseWriter, r *http.Request) {
	c, err := parseConsumerChange(r)
	if err != nil {
		writeJSON(w, http.StatusBadRequest, jsonError{Error: err.Error()})
		return
	}
	info, err := applyConsumerChange(s.j, c)
	if err != nil {
		writeJSON(w, http.StatusBadRequest, jsonError{Error: err.Error()})
		return
	}
	writeJSON(w, http.StatusOK, jsonConsumer(info))
}

// ChangeConsumer opens the file writable for the change alone, as Commit.
func (f fileSource) ChangeConsumer(_ context.Context, c consumerChange) (info journal.ConsumerInfo, err error) {
	j, err := openWritable(f.path)
	if err != nil {
		return info, err
	}
	defer func() { err = errors.Join(err, j.Close()) }()
	return applyConsumerChange(j, c)
}

// ChangeConsumer asks the watch that holds the file to make the change.
func (s *sockSource) ChangeConsumer(ctx context.Context, c consumerChange) (journal.ConsumerInfo, error) {
	var jc jsonConsumer
	err := s.do(ctx, http.MethodPost, "/consumers/"+url.PathEscape(c.Name)+"/change", c.query(), &jc)
	return journal.ConsumerInfo(jc), err
}

// consumerChanger is a source that changes consumers.
type consumerChanger interface {
	ChangeConsumer(ctx context.Context, c consumerChange) (journal.ConsumerInfo, error)
}

var (
	_ consumerChanger = fileSource{}
	_ consumerChanger = (*sockSource)(nil)
)

// newConsumerChangeCmds returns consumers create, reset and delete.
func newConsumerChangeCmds() []*cobra.Command {
	return []*cobra.Command{newConsumerCreateCmd(), newConsumerResetCmd(), newConsumerDeleteCmd()}
}

func newConsumerCreateCmd() *cobra.Command {
	var db string
	var atHead bool
	var from uint64
	cmd := &cobra.Command{
		Use:   "create NAME --db FILE [--at-head | --from OFFSET]",
		Short: "Register a durable consumer",
		Long: "Register consumer NAME. It reads from the first retained event, or with --at-head only\n" +
			"the events journaled from now on, or with --from from OFFSET on. Registered consumers\n" +
			"hold retention back until the hard byte cap.",
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if atHead && cmd.Flags().Changed("from") {
				return errors.New("--at-head and --from exclude each other: give one position")
			}
			if cmd.Flags().Changed("from") && from == 0 {
				return errors.New("--from 0: want an offset of 1 or more")
			}
			c := consumerChange{Op: "create", Name: args[0], Offset: from, Head: atHead}
			return runConsumerChange(cmd.Context(), cmd.OutOrStdout(), db, c)
		},
	}
	addDBFlag(cmd, &db)
	cmd.Flags().BoolVar(&atHead, "at-head", false, "read only the events journaled from now on")
	cmd.Flags().Var(offsetValue{&from}, "from", "read from `OFFSET` on")
	return cmd
}

func newConsumerResetCmd() *cobra.Command {
	var db, toTime string
	var toHead bool
	var toOffset uint64
	cmd := &cobra.Command{
		Use:   "reset NAME --db FILE (--to-offset OFFSET | --to-time TIME | --to-head)",
		Short: "Move a consumer back or forward",
		Long: "Move consumer NAME so that it reads next from OFFSET, from the first event journaled at\n" +
			"or after TIME (RFC 3339, or a duration ago: 10m, 1d), or from the head (skip the\n" +
			"backlog). Its committed offset becomes one less: backwards too, on purpose.",
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			fl := cmd.Flags()
			n := 0
			for _, name := range []string{"to-offset", "to-time", "to-head"} {
				if fl.Changed(name) {
					n++
				}
			}
			if n != 1 {
				return errors.New("give one of --to-offset, --to-time and --to-head")
			}
			if fl.Changed("to-offset") && toOffset == 0 {
				return errors.New("--to-offset 0: want an offset of 1 or more")
			}
			at, err := parseTimeFlag("to-time", toTime, time.Now())
			if err != nil {
				return err
			}
			c := consumerChange{Op: "reset", Name: args[0], Offset: toOffset, At: at, Head: toHead}
			return runConsumerChange(cmd.Context(), cmd.OutOrStdout(), db, c)
		},
	}
	addDBFlag(cmd, &db)
	cmd.Flags().Var(offsetValue{&toOffset}, "to-offset", "read next from `OFFSET`")
	cmd.Flags().StringVar(&toTime, "to-time", "", "read next from the first event at or after `TIME`")
	cmd.Flags().BoolVar(&toHead, "to-head", false, "read next from the head: skip what is journaled")
	return cmd
}

func newConsumerDeleteCmd() *cobra.Command {
	var db string
	cmd := &cobra.Command{
		Use:   "delete NAME --db FILE",
		Short: "Delete a consumer, and its hold on retention",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return runConsumerChange(cmd.Context(), cmd.OutOrStdout(), db, consumerChange{Op: "delete", Name: args[0]})
		},
	}
	addDBFlag(cmd, &db)
	return cmd
}

// runConsumerChange makes c in the file db, or through the watch that
// holds it, and prints what it did.
func runConsumerChange(ctx context.Context, out io.Writer, db string, c consumerChange) error {
	src, err := openSource(ctx, db)
	if err != nil {
		return err
	}
	info, err := src.(consumerChanger).ChangeConsumer(ctx, c)
	if handover(err) { // a watch took the file, or stopped, meanwhile
		if src, err = openSource(ctx, db); err == nil {
			info, err = src.(consumerChanger).ChangeConsumer(ctx, c)
		}
	}
	if err != nil {
		return err
	}
	if c.Op == "delete" {
		fmt.Fprintf(out, "consumer %s deleted\n", c.Name)
		return nil
	}
	done := map[string]string{"create": "created", "reset": "reset"}[c.Op]
	fmt.Fprintf(out, "consumer %s %s: committed %d, reads from %d, lag %d\n", c.Name, done, info.Committed, info.Committed+1, info.Lag)
	return nil
}

// uintParam reads the query parameter name as an unsigned integer, 0 when
// absent.
func uintParam(r *http.Request, name string) (uint64, error) {
	v := r.URL.Query().Get(name)
	if v == "" {
		return 0, nil
	}
	n, err := strconv.ParseUint(v, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("bad %s %q", name, v)
	}
	return n, nil
}

// writeJSON answers with v as JSON and the status code.
func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(v)
}
