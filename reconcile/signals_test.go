package reconcile_test

// Server signals and timing: throttling and
// Retry-After, refused watches that must stay watches, the caller's
// Timeout, undecodable frames, LastError after a healthy resume, and
// log-once by kind. Faults are injected at the HTTP level, in front of the
// real kube-apiserver.

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/go-logr/zapr"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest"
	"go.uber.org/zap/zaptest/observer"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/rest"

	"github.com/watchjournal/watchjournal/journal"
	"github.com/watchjournal/watchjournal/reconcile"
)

// request is one request the injector saw.
type request struct {
	at       time.Time // when it reached the injector
	answered time.Time // when the injector answered it, if it did
	watch    bool
	rv       string // resourceVersion parameter
	faulted  bool
	// check: a one-item list (limit=1), the resume check's (probe.go),
	// not a relist.
	check bool
}

// injector answers the next listFaults list requests and the next
// watchFaults watch requests with fault instead of the server's answer, and
// records every request.
type injector struct {
	mu          sync.Mutex
	listFaults  int
	watchFaults int
	fault       func(*http.Request) (*http.Response, error)
	reqs        []request
}

func (in *injector) wrap(rt http.RoundTripper) http.RoundTripper {
	return roundTripFunc(func(req *http.Request) (*http.Response, error) {
		q := req.URL.Query()
		r := request{at: time.Now(), watch: q.Get("watch") == "true", rv: q.Get("resourceVersion"), check: q.Get("limit") == "1"}
		if !strings.HasSuffix(req.URL.Path, "/configmaps") {
			// Discovery (New records the kind) is neither a list nor a
			// watch of the resource.
			return rt.RoundTrip(req)
		}
		in.mu.Lock()
		if r.watch && in.watchFaults > 0 {
			in.watchFaults--
			r.faulted = true
		} else if !r.watch && in.listFaults > 0 {
			in.listFaults--
			r.faulted = true
		}
		fault := in.fault
		in.mu.Unlock()
		if !r.faulted {
			in.record(r)
			return rt.RoundTrip(req)
		}
		resp, err := fault(req)
		r.answered = time.Now()
		in.record(r)
		return resp, err
	})
}

func (in *injector) record(r request) {
	in.mu.Lock()
	in.reqs = append(in.reqs, r)
	in.mu.Unlock()
}

func (in *injector) arm(lists, watches int) {
	in.mu.Lock()
	in.listFaults, in.watchFaults = lists, watches
	in.mu.Unlock()
}

// requests returns the requests seen from index from on.
func (in *injector) requests(from int) []request {
	in.mu.Lock()
	defer in.mu.Unlock()
	return append([]request(nil), in.reqs[min(from, len(in.reqs)):]...)
}

func (in *injector) count() int {
	in.mu.Lock()
	defer in.mu.Unlock()
	return len(in.reqs)
}

// answer builds a response as the apiserver would send it.
func answer(req *http.Request, code int, header http.Header, contentType, body string) *http.Response {
	if header == nil {
		header = http.Header{}
	}
	header.Set("Content-Type", contentType)
	return &http.Response{StatusCode: code, Status: fmt.Sprintf("%d %s", code, http.StatusText(code)), Request: req,
		ProtoMajor: 1, ProtoMinor: 1, Header: header, Body: io.NopCloser(strings.NewReader(body))}
}

// apfTooManyRequests is API Priority and Fairness's 429 (k8s.io/apiserver
// pkg/server/filters, tooManyRequests): a Retry-After header and a plain
// text body.
func apfTooManyRequests(secs int) func(*http.Request) (*http.Response, error) {
	return func(req *http.Request) (*http.Response, error) {
		return answer(req, http.StatusTooManyRequests, http.Header{"Retry-After": {fmt.Sprint(secs)}},
			"text/plain; charset=utf-8", "Too many requests, please try again later.\n"), nil
	}
}

// observed returns options whose logger (logr over zap, through zapr:
// V(0) is info, V(1) debug, Error error) writes to the test log and to an
// observer that keeps every entry, debug included.
func observed(t *testing.T, opts reconcile.Options) (reconcile.Options, *observer.ObservedLogs) {
	core, logs := observer.New(zapcore.DebugLevel)
	opts.Logger = zapr.NewLogger(zap.New(zapcore.NewTee(zaptest.NewLogger(t).Core(), core)))
	return opts, logs
}

// A list answered 429 with Retry-After: 3 is not tried again before 3 s
// have passed, whatever the backoff says (MinBackoff 20 ms); the wait is
// logged as throttling, at info.
func TestLoop_ListThrottled_RetriesNoEarlierThanRetryAfter(t *testing.T) {
	e := newEnv(t)
	e.create("a")
	in := &injector{fault: apfTooManyRequests(3)}
	in.arm(3, 0)
	cfg := e.wrapped(in.wrap)
	opts, logs := observed(t, pagedOptions(t))
	e.start(cfg, opts)
	st := e.waitStatus("initial list after three 429s", watching(1))

	lists := []request{}
	for _, r := range in.requests(0) {
		if !r.watch {
			lists = append(lists, r)
		}
	}
	if len(lists) < 4 {
		t.Fatalf("list requests = %d; want 3 refused and 1 served", len(lists))
	}
	for i := 0; i < 3; i++ {
		if !lists[i].faulted {
			t.Fatalf("list request %d was not refused", i)
		}
		if gap := lists[i+1].at.Sub(lists[i].answered); gap < 3*time.Second {
			t.Errorf("list retry %d came %v after the 429; want no earlier than the 3s Retry-After", i+1, gap)
		}
	}
	if st.Throttled != 3 || st.Lists != 1 {
		t.Errorf("Status.Throttled, Lists = %d, %d; want 3, 1", st.Throttled, st.Lists)
	}
	throttled := logs.FilterMessageSnippet("throttled").All()
	if len(throttled) == 0 || throttled[0].Level != zapcore.InfoLevel {
		t.Errorf("log lines about throttling = %v; want one at info first", throttled)
	}
	if n := logs.FilterLevelExact(zapcore.ErrorLevel).Len(); n != 0 {
		t.Errorf("error lines while throttled = %d (%v); want none", n, logs.FilterLevelExact(zapcore.ErrorLevel).All())
	}
}

// A watch the server refuses, again and again, with anything but a gone
// resourceVersion (429 with Retry-After as a header or in the Status, 503,
// 500, a connection that cannot be made) is retried as a watch from the
// same resourceVersion: no relist, however many refusals. Once the server
// answers, the watch resumes from that resourceVersion and the change made
// meanwhile arrives as a watch event. Each kind is logged once.
func TestLoop_WatchRefused_RetriedAsWatchNeverRelists(t *testing.T) {
	status := func(code int, reason string, details string) func(*http.Request) (*http.Response, error) {
		return func(req *http.Request) (*http.Response, error) {
			// The message names the URL, as client-go's errors do: it
			// differs on every try (timeoutSeconds is randomised).
			body := fmt.Sprintf(`{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"injected for %s","reason":%q,"code":%d%s}`,
				req.URL.String(), reason, code, details)
			return answer(req, code, nil, "application/json", body), nil
		}
	}
	cases := []struct {
		name     string
		fault    func(*http.Request) (*http.Response, error)
		floor    time.Duration // the delay the server asks for
		logLevel zapcore.Level // of the one line that reports the kind
	}{
		{"429 Retry-After header", apfTooManyRequests(1), time.Second, zapcore.InfoLevel},
		{"429 Status details.retryAfterSeconds", status(429, "TooManyRequests", `,"details":{"retryAfterSeconds":1}`), time.Second, zapcore.InfoLevel},
		{"503", status(503, "ServiceUnavailable", ""), 0, zapcore.ErrorLevel},
		{"500", status(500, "InternalError", ""), 0, zapcore.ErrorLevel},
		{"connection refused", func(req *http.Request) (*http.Response, error) {
			return nil, &net.OpError{Op: "dial", Net: "tcp", Err: os.NewSyscallError("connect", syscall.ECONNREFUSED)}
		}, 0, zapcore.ErrorLevel},
	}
	const refusals = 6
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t)
			e.create("a")
			in := &injector{fault: tc.fault}
			cfg := e.wrapped(in.wrap)
			opts, logs := observed(t, testOptions(t))
			// The quiet watch is replaced after IdleTimeout, a normal end;
			// the next watches are refused.
			opts.IdleTimeout = 1500 * time.Millisecond
			e.start(cfg, opts)
			st := e.waitStatus("initial list", watching(1))
			rv, h := st.ResourceVersion, e.head()
			seen := in.count()
			in.arm(0, refusals)
			e.waitStatus("the first refusal", func(s reconcile.Status) bool { return s.LastError != nil })
			e.create("b") // while the watch is refused
			e.waitHead(h + 1)

			e.expectEvents("events after the refusals", h+1, []string{"ADDED b watch"})
			st = e.loop.Status()
			if st.Lists != 1 || st.Gone != 0 {
				t.Errorf("Status.Lists, Gone = %d, %d; want 1, 0: a refused watch never relists", st.Lists, st.Gone)
			}
			var watches []request
			for _, r := range in.requests(seen) {
				switch {
				case r.check: // a resume check after a lost connection (probe.go)
				case !r.watch:
					t.Errorf("a list request came after the watch refusals (%+v); want none (one-item resume checks aside)", r)
				default:
					watches = append(watches, r)
				}
			}
			if len(watches) < refusals+1 {
				t.Fatalf("watch requests = %d; want %d refused, then one served", len(watches), refusals)
			}
			for i, r := range watches[:refusals+1] {
				if r.rv != rv {
					t.Errorf("watch request %d from resourceVersion %s; want the same %s", i, r.rv, rv)
				}
				if i > 0 && r.at.Sub(watches[i-1].answered) < tc.floor {
					t.Errorf("watch retry %d came %v after the refusal; want no earlier than %v", i, r.at.Sub(watches[i-1].answered), tc.floor)
				}
			}
			lines := logs.FilterMessageSnippet("backing off").All()
			lines = append(lines, logs.FilterMessageSnippet("throttled").All()...)
			above := 0
			for _, l := range lines {
				if l.Level >= zapcore.InfoLevel {
					above++
					if l.Level != tc.logLevel {
						t.Errorf("log line %q at %v; want %v", l.Message, l.Level, tc.logLevel)
					}
				}
			}
			if above != 1 {
				t.Errorf("log lines at info or above for %d refusals of one kind = %d; want 1", refusals, above)
			}
			e.checkIndex(e.j)
		})
	}
}

// A watch from the revision just below etcd's compaction revision gets a
// 500 "etcd event received with PrevKv=nil" (watch cache off), never a 410;
// the server will never serve that resourceVersion again. The loop
// recognises it and relists at once, logged at info: by the watch's 500
// (its message), or, when the connection was lost first as here, by the
// resume check's list at exactly the stored resourceVersion, which answers
// 410 (probe.go) before any watch is sent.
func TestLoop_CompactedRevision_RelistsAtOnceLoggedAtInfo(t *testing.T) {
	e := newEnv(t)
	e.create("a")
	opts, logs := observed(t, testOptions(t))
	h := e.startListed(nil, opts)
	e.proxy.Cut()
	e.update("a")
	e.compact()
	e.proxy.Heal()
	st := e.waitStatus("relist", watching(2))
	e.expectEvents("events", h+1, []string{"MODIFIED a relist"})
	if st.Gone != 1 {
		t.Errorf("Status.Gone = %d; want 1 (the compaction-revision 500)", st.Gone)
	}
	said := append(logs.FilterMessageSnippet("PrevKv=nil").All(), logs.FilterMessageSnippet("no longer served").All()...)
	if len(said) != 1 || said[0].Level != zapcore.InfoLevel {
		t.Errorf("log lines naming PrevKv=nil or a resourceVersion no longer served = %v; want one at info", said)
	}
	// The cut itself may log an error (the watch's connection ends); the
	// refusal must not.
	for _, w := range logs.FilterLevelExact(zapcore.ErrorLevel).All() {
		if err, _ := w.ContextMap()["error"].(string); strings.Contains(err, "PrevKv") || strings.Contains(w.Message, "relist") {
			t.Errorf("error line %q (%s); want the compaction-revision refusal at info only", w.Message, err)
		}
	}
	e.checkIndex(e.j)
}

// rest.Config.Timeout (here 2 s) bounds requests that are not watches: a
// watch lives for its timeoutSeconds on one connection, with no backoff and
// no error, well past 2 s.
func TestLoop_ConfigTimeout_DoesNotCutTheWatch(t *testing.T) {
	e := newEnv(t)
	e.create("a")
	in := &injector{}
	cfg := e.cp.ProxiedRESTConfig(e.proxy)
	cfg.Timeout = 2 * time.Second
	cfg.Wrap(in.wrap)
	opts := testOptions(t)
	opts.IdleTimeout = time.Minute
	h := e.startListed(cfg, opts)
	opened := time.Now()
	// Time must pass: the fault is a cut at cfg.Timeout.
	time.Sleep(3 * time.Second)
	e.create("b")
	e.waitHead(h + 1)
	e.expectEvents("events", h+1, []string{"ADDED b watch"})
	st := e.loop.Status()
	watches := 0
	for _, r := range in.requests(0) {
		if r.watch {
			watches++
		}
	}
	if watches != 1 || st.Watches != 1 || st.Backoffs != 0 || st.LastError != nil {
		t.Errorf("after %v: watch requests %d, Status.Watches %d, Backoffs %d, LastError %v; want 1, 1, 0, nil",
			time.Since(opened).Round(time.Millisecond), watches, st.Watches, st.Backoffs, st.LastError)
	}
}

// A watch frame that is not JSON is a watch failure like any other: it
// backs off (growing from MinBackoff), is retried from the same
// resourceVersion, and once the server sends good frames again the loop
// recovers: on a quiet resource LastError clears once the watch has stayed
// open, and the next failure backs off from MinBackoff again.
func TestLoop_UndecodableWatchFrame_BacksOffAndRecovers(t *testing.T) {
	e := newEnv(t)
	e.create("a")
	in := &injector{fault: func(req *http.Request) (*http.Response, error) {
		return answer(req, http.StatusOK, nil, "application/json", `{"type":"ADDED","object":{"metadata":]}`+"\n"), nil
	}}
	cfg := e.wrapped(in.wrap)
	opts, logs := observed(t, testOptions(t))
	opts.MinBackoff, opts.MaxBackoff = 50*time.Millisecond, 10*time.Second
	// The quiet watch is replaced after IdleTimeout, a normal end; the
	// next watches get the bad frame.
	opts.IdleTimeout = 1500 * time.Millisecond
	e.start(cfg, opts)
	st := e.waitStatus("initial list", watching(1))
	rv := st.ResourceVersion

	const bad = 4
	seen := in.count()
	in.arm(0, bad)
	e.waitStatus("undecodable frame reported", func(s reconcile.Status) bool {
		return errors.Is(s.LastError, reconcile.ErrWatch) && errors.Is(s.LastError, reconcile.ErrDecode)
	})
	st = e.waitStatus("healthy again on a quiet resource", func(s reconcile.Status) bool {
		return s.Backoffs >= bad && s.Phase == reconcile.PhaseWatching && s.LastError == nil
	})
	if st.Lists != 1 {
		t.Errorf("Status.Lists = %d; want 1: an undecodable frame does not relist", st.Lists)
	}
	for _, r := range in.requests(seen) {
		if !r.watch || r.rv != rv {
			t.Errorf("request after the bad frames: watch %v from %q; want watches from %s", r.watch, r.rv, rv)
		}
	}
	var delays []time.Duration
	for _, l := range logs.FilterMessageSnippet("undecodable").All() {
		if d, ok := l.ContextMap()["delay"].(time.Duration); ok {
			delays = append(delays, d)
		}
	}
	if len(delays) != bad || delays[bad-1] < 4*opts.MinBackoff {
		t.Fatalf("backoff delays for %d bad frames = %v; want %d growing from MinBackoff", bad, delays, bad)
	}

	// One more bad frame: the backoff starts again from MinBackoff.
	logs.TakeAll()
	in.arm(0, 1)
	e.waitStatus("one more bad frame", func(s reconcile.Status) bool { return errors.Is(s.LastError, reconcile.ErrDecode) })
	e.waitStatus("healthy again", func(s reconcile.Status) bool { return s.Phase == reconcile.PhaseWatching && s.LastError == nil })
	delays = nil
	for _, l := range logs.FilterMessageSnippet("undecodable").All() {
		if d, ok := l.ContextMap()["delay"].(time.Duration); ok {
			delays = append(delays, d)
		}
	}
	if len(delays) != 1 || delays[0] >= opts.MinBackoff {
		t.Errorf("backoff after recovery = %v; want one below MinBackoff %v (reset on success)", delays, opts.MinBackoff)
	}
}

// Run returns the journal's error even when ctx is done at the same time:
// here the journal fails on the loop's first read and ctx has already
// ended.
func TestLoop_Run_ReturnsJournalErrorAsCtxEnds(t *testing.T) {
	res := journal.Resource{GVR: schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}, Namespace: "default"}
	j, err := journal.Open(t.TempDir()+"/j.db", &journal.Options{Resource: &res, NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	l, err := reconcile.New(&rest.Config{Host: "https://127.0.0.1:1"}, j, reconcile.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if err := j.Close(); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := l.Run(ctx); !errors.Is(err, reconcile.ErrJournal) {
		t.Errorf("Run(ended ctx) with a failing journal = %v; want ErrJournal", err)
	}
}
