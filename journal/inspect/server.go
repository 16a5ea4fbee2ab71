// Package inspect serves a journal held open for writing to readers in
// other processes. The writer holds bbolt's exclusive lock, so no other
// process can open the file, even read-only; the writer answers reads
// instead, as JSON over HTTP on the unix socket <file>.sock (SocketPath,
// which says where a socket goes whose path that long would not fit).
// journalctl watch serves it, and so does any program that embeds the
// library and calls Serve: journalctl stats, events, index, consumers and
// relist then work against it.
//
//	GET /stats                 journal.Stats
//	GET /events?from=N&limit=M events from offset N (0: the first retained);
//	                           410 with "compacted" below the first retained
//	GET /index?after=KEY&limit=M index entries with keys after KEY
//	GET /head                  {"head": N}, the last offset assigned
//	GET /wait?after=N          {"head": N} once the head is past N, or after
//	                           at most Options.MaxWait: clients loop
//	GET /status                the reconcile.Status of the writer (with the
//	                           list's progress: listPages, listObjects), and
//	                           its pid; 404 without a loop
//	POST /verify               asks the loop to relist and diff against the
//	                           index (reconcile.Loop.Verify), and answers at
//	                           once with the head and the loop's verifies and
//	                           divergences from before the request
//	GET /verify?after=N        the status once its verifies are past N, the
//	                           loop stopped, or after at most MaxWait
//	GET /consumers             the consumers: name, committed offset, lag
//	GET /retention             the retention the file records
//	POST /consumers/NAME/commit?offset=N
//	                           commits N for the existing consumer NAME
//	                           (path-escaped); 404 when there is none
//	POST /consumers/NAME/change?op=OP[&offset=N|&time=T|&head=true]
//	                           creates (op=create), moves (op=reset) or
//	                           deletes (op=delete) consumer NAME: it reads
//	                           next from offset N, the first event at or
//	                           after T (RFC 3339), or the head (ChangeConsumer)
//
// Errors answer {"error": text}, 400 for a bad request.
// Client is the other end: journalctl uses it, and so can any program.
//
// Only the consumer commits and changes write; nothing else the socket
// offers changes the journal. Access is the socket file's mode: 0600, the writer's user.
package inspect

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"strconv"
	"time"

	"github.com/go-logr/logr"

	"github.com/watchjournal/watchjournal/journal"
)

// Page sizes, in events or index entries.
const (
	defaultLimit = 1000
	maxLimit     = 10000
)

// Options configure Handler, Listen and Serve. A nil *Options means the
// defaults.
type Options struct {
	// MaxWait is the longest a /wait or GET /verify long poll is held
	// before it answers; clients ask again. Default 30 s.
	MaxWait time.Duration
	// PID is the process id /status reports. Default os.Getpid(); negative:
	// none.
	PID int
	// Logger receives the server's errors (logr, as journal.Options and
	// the rest of the library). The zero Logger discards.
	Logger logr.Logger

	// hooks are settings only this package's tests set (testhooks.go).
	hooks testHooks
}

func (o *Options) withDefaults() Options {
	var r Options
	if o != nil {
		r = *o
	}
	if r.MaxWait <= 0 {
		r.MaxWait = 30 * time.Second
	}
	switch {
	case r.PID == 0:
		r.PID = os.Getpid()
	case r.PID < 0:
		r.PID = 0
	}
	return r
}

// server answers the socket's requests from a journal held open for writing.
type server struct {
	j       *journal.Journal
	loop    Loop
	maxWait time.Duration // longest /wait and GET /verify
	pid     int           // the process id /status reports; 0: none
	hooks   testHooks     // as Options.hooks
}

// Handler returns the socket's HTTP handler (the protocol in the package
// comment) for j, written by loop. A nil loop (a journal without a loop in
// this process) answers /status and /verify with 404.
func Handler(j *journal.Journal, loop Loop, opts *Options) http.Handler {
	o := opts.withDefaults()
	s := &server{j: j, loop: loop, maxWait: o.MaxWait, pid: o.PID, hooks: o.hooks}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /stats", s.stats)
	mux.HandleFunc("GET /events", s.events)
	mux.HandleFunc("GET /index", s.index)
	mux.HandleFunc("GET /head", s.head)
	mux.HandleFunc("GET /wait", s.wait)
	if loop != nil {
		mux.HandleFunc("GET /status", func(w http.ResponseWriter, _ *http.Request) {
			ws := toStatus(s.loop.InspectStatus())
			ws.PID = s.pid
			writeJSON(w, http.StatusOK, ws)
		})
		mux.HandleFunc("POST /verify", s.verify)
		mux.HandleFunc("GET /verify", s.verified)
	} else {
		noLoop := func(w http.ResponseWriter, _ *http.Request) {
			writeJSON(w, http.StatusNotFound, jsonError{Error: "no reconcile loop writes this journal in this process"})
		}
		mux.HandleFunc("GET /status", noLoop)
		mux.HandleFunc("/verify", noLoop)
	}
	mux.HandleFunc("GET /consumers", s.consumers)
	mux.HandleFunc("GET /retention", s.retention)
	mux.HandleFunc("POST /consumers/{name}/commit", s.commit)
	mux.HandleFunc("POST /consumers/{name}/change", s.change)
	return mux
}

func (s *server) consumers(w http.ResponseWriter, _ *http.Request) {
	cs, err := s.j.Consumers().List()
	reply(w, convert(cs, func(c journal.ConsumerInfo) Consumer { return Consumer(c) }), err)
}

func (s *server) retention(w http.ResponseWriter, _ *http.Request) {
	r, err := s.j.Settings().Retention()
	reply(w, NewRetention(r), err)
}

func (s *server) stats(w http.ResponseWriter, _ *http.Request) {
	st, err := s.j.Stats()
	reply(w, NewStats(st), err)
}

func (s *server) events(w http.ResponseWriter, r *http.Request) {
	from, err1 := uintParam(r, "from")
	limit, err2 := limitParam(r)
	if err := errors.Join(err1, err2); err != nil {
		writeJSON(w, http.StatusBadRequest, jsonError{Error: err.Error()})
		return
	}
	evs, err := s.j.Read(from, limit)
	reply(w, convert(evs, NewEvent), err)
}

func (s *server) index(w http.ResponseWriter, r *http.Request) {
	limit, err := limitParam(r)
	if err != nil {
		writeJSON(w, http.StatusBadRequest, jsonError{Error: err.Error()})
		return
	}
	es, err := s.j.ScanIndex(r.URL.Query().Get("after"), limit)
	reply(w, convert(es, func(e journal.IndexEntry) IndexEntry { return IndexEntry(e) }), err)
}

func (s *server) head(w http.ResponseWriter, _ *http.Request) {
	h, err := s.j.Head()
	reply(w, jsonHead{Head: h}, err)
}

// wait answers once the head is past after, after maxWait, or when the
// server stops (its base context ends), with the head at that time.
func (s *server) wait(w http.ResponseWriter, r *http.Request) {
	s.longPoll(w, r, func(ctx context.Context, after uint64) {
		if err := s.j.Wait(ctx, after); err != nil && ctx.Err() == nil {
			writeJSON(w, http.StatusServiceUnavailable, jsonError{Error: err.Error()})
			return
		}
		s.head(w, r)
	})
}

// verify asks the loop for an anti-entropy relist. It answers at once with
// the head and the loop's counters read before the request: the client
// waits on GET /verify for the verifies to pass them.
func (s *server) verify(w http.ResponseWriter, _ *http.Request) {
	st := s.loop.InspectStatus()
	head, err := s.j.Head()
	if err != nil {
		reply(w, nil, err)
		return
	}
	s.loop.Verify()
	writeJSON(w, http.StatusOK, VerifyRequest{Head: head, Verifies: st.Verifies, Divergences: st.Divergences})
}

// verified answers with the loop's status once its verifies are past after,
// the loop has stopped, maxWait has passed, or the server stops.
func (s *server) verified(w http.ResponseWriter, r *http.Request) {
	s.longPoll(w, r, func(ctx context.Context, after uint64) {
		_ = s.loop.WaitForInspect(ctx, func(st LoopStatus) bool { // an error is ctx's: answer anyway
			return uint64(st.Verifies) > after || st.Phase == PhaseStopped
		})
		writeJSON(w, http.StatusOK, toStatus(s.loop.InspectStatus()))
	})
}

// longPoll serves a long poll: it calls answer with the request's after
// parameter and a context that ends after maxWait, with the request, or
// when the server stops; a malformed after is a 400, a missing one 0.
func (s *server) longPoll(w http.ResponseWriter, r *http.Request, answer func(ctx context.Context, after uint64)) {
	after, err := uintParam(r, "after")
	if err != nil {
		writeJSON(w, http.StatusBadRequest, jsonError{Error: err.Error()})
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), s.maxWait)
	defer cancel()
	answer(ctx, after)
}

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

func limitParam(r *http.Request) (int, error) {
	n, err := uintParam(r, "limit")
	switch {
	case err != nil:
		return 0, err
	case n == 0:
		return defaultLimit, nil
	}
	return int(min(n, maxLimit)), nil
}

// reply writes v, or err with 410 for a trimmed offset and 500 otherwise.
func reply(w http.ResponseWriter, v any, err error) {
	var ce *journal.TrimmedError
	switch {
	case errors.As(err, &ce):
		writeJSON(w, http.StatusGone, jsonError{Error: err.Error(), Compacted: (*jsonCompacted)(ce)})
	case err != nil:
		writeJSON(w, http.StatusInternalServerError, jsonError{Error: err.Error()})
	default:
		writeJSON(w, http.StatusOK, v)
	}
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(v)
}

// Serve serves j (written by loop, which may be nil) on the unix socket
// SocketPath(j.Path()) until ctx is done, then closes the socket and
// returns nil. It is the one call an embedding program makes so that
// journalctl's read-only commands (stats, events, index, consumers) and
// relist work against it while it holds the journal's lock:
//
//	go func() { _ = inspect.Serve(ctx, j, loop, nil) }()
//
// The socket is created with mode 0600 (owned by the process's user) and
// replaces a stale one. It returns the listen error at once.
func Serve(ctx context.Context, j *journal.Journal, loop Loop, opts *Options) error {
	o := opts.withDefaults()
	stop, err := Listen(SocketPath(j.Path()), Handler(j, loop, &o), o.Logger)
	if err != nil {
		return err
	}
	<-ctx.Done()
	stop()
	return nil
}

// Listen serves h on the unix socket sock, replacing a stale one: the
// caller holds the journal's exclusive lock, so no other writer can serve
// it. The socket is readable by the process's user only, from the moment it
// exists (listenPrivate). stop ends open requests (long polls answer at
// once), waits for the serving goroutine to exit and removes the socket.
// log receives the serving goroutine's error; the zero Logger discards.
func Listen(sock string, h http.Handler, log logr.Logger) (stop func(), err error) {
	if err := prepareSocketDir(sock); err != nil {
		return nil, err
	}
	if err := os.Remove(sock); err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("inspect: remove stale socket: %w", err)
	}
	ln, err := listenPrivate(sock) // 0600 from the start
	if err != nil {
		return nil, fmt.Errorf("inspect: listen: %w", err)
	}
	base, cancel := context.WithCancel(context.Background())
	srv := &http.Server{
		Handler:           h,
		ReadHeaderTimeout: 10 * time.Second,
		BaseContext:       func(net.Listener) context.Context { return base },
	}
	done := make(chan struct{})
	go func() { // exits when stop shuts the server down
		defer close(done)
		if err := srv.Serve(ln); !errors.Is(err, http.ErrServerClosed) {
			log.Error(err, "socket server failed", "socket", sock)
		}
	}()
	return func() {
		cancel()
		ctx, cancelShutdown := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancelShutdown()
		_ = srv.Shutdown(ctx)
		<-done
		_ = os.Remove(sock)
	}, nil
}
