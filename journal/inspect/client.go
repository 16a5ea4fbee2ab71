package inspect

// The client end of the socket: what journalctl's read-only commands,
// events --commit, consumers create/reset/delete and relist ask a running
// writer. Each method is one request (WaitVerify repeats its long poll);
// answers decode from the shapes in wire.go into the journal's types.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/watchjournal/watchjournal/journal"
)

// ErrNoServer is returned by a Client's methods when nothing answers on
// its socket: no writer serves the file, or it stopped.
var ErrNoServer = errors.New("journalctl: no watch serves the file")

// Client asks the server on a journal's socket (Serve). Its methods are
// safe for concurrent use. A server's error answer becomes an error with
// its text; an offset below the first retained one a
// *journal.TrimmedError.
type Client struct {
	sock string
	c    *http.Client
}

// NewClient returns a client of the server on the unix socket sock
// (SocketPath of the journal's file). It connects on the first request.
func NewClient(sock string) *Client {
	dial := func(ctx context.Context, _, _ string) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, "unix", sock)
	}
	return &Client{sock: sock, c: &http.Client{Transport: &http.Transport{DialContext: dial}}}
}

// Socket returns the path of the client's socket.
func (c *Client) Socket() string { return c.sock }

// Close closes the client's idle connections.
func (c *Client) Close() { c.c.CloseIdleConnections() }

// do sends a request with method to path?q and decodes the JSON answer
// into v. No answer is ErrNoServer; an error answer an error.
func (c *Client) do(ctx context.Context, method, path string, q url.Values, v any) error {
	req, err := http.NewRequestWithContext(ctx, method, "http://journal"+path+"?"+q.Encode(), nil)
	if err != nil {
		return err
	}
	resp, err := c.c.Do(req)
	if err != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		return fmt.Errorf("%w: %s: %v", ErrNoServer, c.sock, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		var e jsonError
		if err := json.NewDecoder(resp.Body).Decode(&e); err != nil {
			return fmt.Errorf("journalctl: %s: %s", path, resp.Status)
		}
		if e.Compacted != nil {
			return (*journal.TrimmedError)(e.Compacted)
		}
		return errors.New(e.Error)
	}
	if err := json.NewDecoder(resp.Body).Decode(v); err != nil {
		return fmt.Errorf("journalctl: decode %s: %w", path, err)
	}
	return nil
}

// Stats returns the journal's statistics, as journal.Journal.Stats.
func (c *Client) Stats(ctx context.Context) (journal.Stats, error) {
	var st Stats
	err := c.do(ctx, http.MethodGet, "/stats", nil, &st)
	return st.stats(), err
}

// Read returns up to limit events from offset from, as journal.Journal.Read.
func (c *Client) Read(ctx context.Context, from uint64, limit int) ([]journal.Event, error) {
	var jevs []Event
	q := url.Values{"from": {strconv.FormatUint(from, 10)}, "limit": {strconv.Itoa(limit)}}
	if err := c.do(ctx, http.MethodGet, "/events", q, &jevs); err != nil {
		return nil, err
	}
	return convert(jevs, Event.event), nil
}

// ScanIndex returns up to limit index entries with keys after after, as
// journal.Journal.ScanIndex.
func (c *Client) ScanIndex(ctx context.Context, after string, limit int) ([]journal.IndexEntry, error) {
	var jes []IndexEntry
	q := url.Values{"after": {after}, "limit": {strconv.Itoa(limit)}}
	if err := c.do(ctx, http.MethodGet, "/index", q, &jes); err != nil {
		return nil, err
	}
	return convert(jes, func(e IndexEntry) journal.IndexEntry { return journal.IndexEntry(e) }), nil
}

// Head returns the last offset assigned, 0 when none was.
func (c *Client) Head(ctx context.Context) (uint64, error) {
	var h jsonHead
	err := c.do(ctx, http.MethodGet, "/head", nil, &h)
	return h.Head, err
}

// Wait returns the head once it is past after, or earlier, after the
// server's Options.MaxWait: callers loop.
func (c *Client) Wait(ctx context.Context, after uint64) (uint64, error) {
	var h jsonHead
	err := c.do(ctx, http.MethodGet, "/wait", url.Values{"after": {strconv.FormatUint(after, 10)}}, &h)
	return h.Head, err
}

// Status returns the writer's status; a server without a loop answers
// with an error.
func (c *Client) Status(ctx context.Context) (*Status, error) {
	var st Status
	if err := c.do(ctx, http.MethodGet, "/status", nil, &st); err != nil {
		return nil, err
	}
	return &st, nil
}

// Consumers lists the registered consumers in name order, as
// journal.Consumers.List.
func (c *Client) Consumers(ctx context.Context) ([]journal.ConsumerInfo, error) {
	var jcs []Consumer
	if err := c.do(ctx, http.MethodGet, "/consumers", nil, &jcs); err != nil {
		return nil, err
	}
	return convert(jcs, func(c Consumer) journal.ConsumerInfo { return journal.ConsumerInfo(c) }), nil
}

// Retention returns the retention the file records, as
// journal.Settings.Retention.
func (c *Client) Retention(ctx context.Context) (journal.Retention, error) {
	var jr Retention
	if err := c.do(ctx, http.MethodGet, "/retention", nil, &jr); err != nil {
		return journal.Retention{}, err
	}
	return jr.retention()
}

// Commit records off as the committed offset of the existing consumer
// name, as CommitConsumer in the writer's process.
func (c *Client) Commit(ctx context.Context, name string, off uint64) error {
	var jc Consumer
	path := "/consumers/" + url.PathEscape(name) + "/commit"
	return c.do(ctx, http.MethodPost, path, url.Values{"offset": {strconv.FormatUint(off, 10)}}, &jc)
}

// ChangeConsumer makes change ch, as ChangeConsumer in the writer's
// process, and returns the consumer after it.
func (c *Client) ChangeConsumer(ctx context.Context, ch ConsumerChange) (journal.ConsumerInfo, error) {
	var jc Consumer
	err := c.do(ctx, http.MethodPost, "/consumers/"+url.PathEscape(ch.Name)+"/change", ch.query(), &jc)
	return journal.ConsumerInfo(jc), err
}

// Verify asks the writer's loop for a relist and diff against the index
// (POST /verify) and returns the head and the loop's counters from before
// the request.
func (c *Client) Verify(ctx context.Context) (VerifyRequest, error) {
	var v VerifyRequest
	err := c.do(ctx, http.MethodPost, "/verify", nil, &v)
	return v, err
}

// WaitVerify long-polls GET /verify until the loop's verifies pass after
// or the loop stops, and returns its status then. After timeout it returns
// an error naming the loop's phase and last error; when the writer stops
// serving meanwhile, one matching ErrNoServer.
func (c *Client) WaitVerify(ctx context.Context, after int, timeout time.Duration) (Status, error) {
	wctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	done := func(st Status) bool { return st.Verifies > after || st.Phase == PhaseStopped }
	for {
		var st Status
		err := c.do(wctx, http.MethodGet, "/verify", url.Values{"after": {strconv.Itoa(after)}}, &st)
		switch {
		case err == nil && done(st):
			return st, nil
		case ctx.Err() != nil:
			return st, ctx.Err()
		case wctx.Err() != nil:
			// Timed out, maybe mid-poll: one last look, for the message.
			sctx, cancel := context.WithTimeout(ctx, 5*time.Second)
			last, err := c.Status(sctx)
			cancel()
			if err != nil {
				return st, err
			}
			if done(*last) {
				return *last, nil
			}
			lastErr := last.LastError
			if lastErr == "" {
				lastErr = "-"
			}
			return *last, fmt.Errorf("no relist completed within %v (phase %s, last error: %s)", timeout, last.Phase, lastErr)
		case err != nil:
			return st, err
		}
	}
}
