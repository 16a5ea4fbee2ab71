package reconcile_test

import (
	"errors"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"k8s.io/client-go/rest"

	"github.com/watchjournal/watchjournal/internal/testing/controlplane"
	"github.com/watchjournal/watchjournal/reconcile"
)

// reqCounter counts the requests for the env's resource by kind: streaming
// lists (watch with sendInitialEvents), plain watches, and list pages
// (one-item lists of the resume check excluded).
type reqCounter struct {
	mu                   sync.Mutex
	streams, watches     int
	pages, onePageChecks int
}

func (c *reqCounter) wrap(rt http.RoundTripper) http.RoundTripper {
	return roundTripFunc(func(req *http.Request) (*http.Response, error) {
		if strings.HasSuffix(req.URL.Path, "/configmaps") {
			q := req.URL.Query()
			c.mu.Lock()
			switch {
			case q.Get("sendInitialEvents") == "true":
				c.streams++
			case q.Get("watch") == "true":
				c.watches++
			case q.Get("limit") == "1":
				c.onePageChecks++
			default:
				c.pages++
			}
			c.mu.Unlock()
		}
		return rt.RoundTrip(req)
	})
}

// take returns the counts and resets them.
func (c *reqCounter) take() (streams, watches, pages int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	streams, watches, pages = c.streams, c.watches, c.pages
	c.streams, c.watches, c.pages = 0, 0, 0
	return streams, watches, pages
}

// startCounting starts e's loop with testOptions through a reqCounter and
// waits for its initial list; it returns the counter, the config (for a
// restart) and the status after the list.
func (e *env) startCounting() (*reqCounter, *rest.Config, reconcile.Status) {
	e.t.Helper()
	rc := &reqCounter{}
	cfg := e.wrapped(rc.wrap)
	e.start(cfg, testOptions(e.t))
	return rc, cfg, e.waitStatus("initial list", watching(1))
}

// The initial list and a relist after a 410 are streaming lists, one
// request each, and the watch goes on on the same connection: the events
// are exactly the gap (a delete while away, a same-name recreation with a
// new UID as DELETED then ADDED), and the index equals the server's. The
// package's apiserver runs with its watch cache off: v1.37 serves
// streaming lists from etcd then (no fallback).
func TestLoop_StreamingList_InitialAndRelistAfter410(t *testing.T) {
	e := newEnv(t)
	e.createAll("a", "b", "c", "d", "e")
	rc, _, st := e.startCounting() // PageSize 2: batches of two
	if st.ListMode != reconcile.ListModeStreaming {
		t.Errorf("Status.ListMode = %q (%s); want streaming", st.ListMode, st.ListModeReason)
	}
	if streams, watches, pages := rc.take(); streams != 1 || watches != 0 || pages != 0 {
		t.Errorf("initial list: %d streaming lists, %d watches, %d pages; want 1, 0, 0 (the stream goes on as the watch)", streams, watches, pages)
	}
	if st.Requests != 1 || st.BytesReceived < st.ListBytes || st.ListBytes == 0 {
		t.Errorf("Status.Requests = %d, BytesReceived = %d, ListBytes = %d; want 1 request, BytesReceived ≥ ListBytes > 0", st.Requests, st.BytesReceived, st.ListBytes)
	}
	e.expectEvents("initial events", 1, []string{"ADDED a relist", "ADDED b relist", "ADDED c relist", "ADDED d relist", "ADDED e relist"})
	e.checkIndex(e.j)

	// Live, on the stream's connection.
	h := e.head()
	e.update("a")
	e.waitHead(h + 1)
	e.expectEvents("live event on the stream's connection", h+1, []string{"MODIFIED a watch"})
	if streams, watches, _ := rc.take(); streams != 0 || watches != 0 {
		t.Errorf("live event: %d streaming lists, %d watches; want none (same connection)", streams, watches)
	}

	h = e.head()
	oldC, _, _ := e.j.Lookup(e.ns + "/c")
	e.proxy.Cut()
	e.update("b")
	e.delete("c")
	newC := e.create("c")
	e.delete("d")
	e.create("f")
	e.compact()
	e.proxy.Heal()
	st = e.waitStatus("relist after 410", watching(2))
	if st.Gone < 1 || st.ListMode != reconcile.ListModeStreaming {
		t.Errorf("Status.Gone = %d, ListMode = %q; want at least 1, streaming", st.Gone, st.ListMode)
	}
	got, evs := e.eventsFrom(h + 1)
	equal(t, "gap events", got, []string{"MODIFIED b relist", "DELETED c relist", "ADDED c relist", "DELETED d relist", "ADDED f relist"})
	if len(evs) == 5 && (evs[1].UID != oldC.UID || string(evs[2].UID) != string(newC.UID)) {
		t.Errorf("c: DELETED uid %s, ADDED uid %s; want %s then %s", evs[1].UID, evs[2].UID, oldC.UID, newC.UID)
	}
	e.checkIndex(e.j)
	if streams, _, pages := rc.take(); streams != 1 || pages != 0 {
		t.Errorf("relist: %d streaming lists, %d pages; want 1 and 0", streams, pages)
	}
	h = e.head()
	e.update("e")
	e.waitHead(h + 1)
	e.expectEvents("live event after the relist", h+1, []string{"MODIFIED e watch"})
	if streams, watches, _ := rc.take(); streams != 0 || watches != 0 {
		t.Errorf("after the relist: %d streaming lists, %d watches; want none (same connection)", streams, watches)
	}
}

// With the watch cache on (production's setting) the streaming list is
// served from the cache: same events, same index.
func TestLoop_StreamingList_WatchCache(t *testing.T) {
	e := watchCacheEnv(t)
	e.createAll("a", "b", "c")
	rc, _, st := e.startCounting()
	if st.ListMode != reconcile.ListModeStreaming {
		t.Errorf("Status.ListMode = %q (%s); want streaming", st.ListMode, st.ListModeReason)
	}
	e.expectEvents("initial events", 1, []string{"ADDED a relist", "ADDED b relist", "ADDED c relist"})
	e.checkIndex(e.j)
	h := e.head()
	e.create("d")
	e.waitHead(h + 1)
	e.expectEvents("live event", h+1, []string{"ADDED d watch"})
	if streams, watches, pages := rc.take(); streams != 1 || watches != 0 || pages != 0 {
		t.Errorf("%d streaming lists, %d watches, %d pages; want 1, 0, 0", streams, watches, pages)
	}
}

// gateOffPlane is a control plane whose apiserver has streaming lists
// turned off (--feature-gates=WatchList=false), watch cache off as the
// package's (so that a compaction makes a resume answer 410).
var gateOffPlane = &otherPlane{prefix: "wj-cp-nowl-", opts: controlplane.Options{
	ExtraAPIServerArgs: []string{"--feature-gates=WatchList=false"}}}

// gateOffEnv is newEnv on gateOffPlane.
func gateOffEnv(t *testing.T) *env {
	t.Helper()
	return gateOffPlane.env(t)
}

// A server with the WatchList gate off answers a streaming list with 422
// Invalid: the loop lists in pages, says so in Status, remembers it in the
// file (a restart asks no streaming list again), and tries again once
// StreamingRetry has passed.
func TestLoop_StreamingList_GateOff_FallsBackToPages(t *testing.T) {
	e := gateOffEnv(t)
	e.createAll("a", "b", "c")
	rc, cfg, st := e.startCounting()
	const refusal = "sendInitialEvents is forbidden for watch unless the WatchList feature gate is enabled"
	if st.ListMode != reconcile.ListModePaginated || !strings.Contains(st.ListModeReason, refusal) {
		t.Errorf("Status.ListMode = %q, reason %q; want paginated, the server's %q", st.ListMode, st.ListModeReason, refusal)
	}
	if st.LastError != nil || st.Backoffs != 0 {
		t.Errorf("Status.LastError = %v, Backoffs = %d; want nil and 0: a refusal is no failure", st.LastError, st.Backoffs)
	}
	if streams, watches, pages := rc.take(); streams != 1 || watches != 1 || pages != 2 {
		t.Errorf("initial list: %d streaming lists, %d watches, %d pages; want 1, 1, 2", streams, watches, pages)
	}
	e.expectEvents("initial events", 1, []string{"ADDED a relist", "ADDED b relist", "ADDED c relist"})
	e.checkIndex(e.j)

	// A restart remembers the refusal: the relist after a 410 (the stored
	// resourceVersion compacted) asks no streaming list.
	e.stop()
	e.delete("b")
	e.compact()
	e.start(cfg, testOptions(t))
	st = e.waitStatus("relist after restart", watching(1))
	if st.ListMode != reconcile.ListModePaginated || !strings.Contains(st.ListModeReason, refusal) {
		t.Errorf("after restart: Status.ListMode = %q, reason %q; want paginated, the recorded %q", st.ListMode, st.ListModeReason, refusal)
	}
	if streams, _, _ := rc.take(); streams != 0 {
		t.Errorf("after restart: %d streaming lists; want 0 (the refusal is remembered)", streams)
	}
	e.checkIndex(e.j)

	// Past StreamingRetry, a relist asks again (and is refused again).
	e.stop()
	e.delete("c")
	e.compact()
	opts := testOptions(t)
	opts.StreamingRetry = time.Nanosecond
	e.start(cfg, opts)
	st = e.waitStatus("relist after StreamingRetry", watching(1))
	if streams, _, _ := rc.take(); streams != 1 || st.ListMode != reconcile.ListModePaginated {
		t.Errorf("after StreamingRetry: %d streaming lists, ListMode %q; want 1, paginated", streams, st.ListMode)
	}
	e.checkIndex(e.j)
}

// A streaming list whose connection is cut, then stalled, in the middle of
// its initial events starts again and ends with every object ADDED exactly
// once and the index equal to the server's. The first list goes into an
// empty index, whose ADDEDs are committed as they come (journal.Relist);
// the list after the cut is a relist, which commits nothing half-way.
func TestLoop_StreamingList_CutAndStalledMidInitialEvents(t *testing.T) {
	e := newEnv(t)
	const n = 100
	createLarge(t, e, n, 8<<10) // about 800 KiB of initial events
	e.proxy.SetRate(64 << 10)   // over 10 s per stream
	defer e.proxy.SetRate(0)
	opts := testOptions(t)
	opts.ProgressTimeout = 500 * time.Millisecond
	e.start(nil, opts)
	midStream := func(s reconcile.Status) bool { return s.Phase == reconcile.PhaseListing && s.ListObjects >= 20 }

	e.waitStatus("initial events under way", midStream)
	e.proxy.Cut()
	st := e.waitStatus("the cut seen", func(s reconcile.Status) bool { return s.LastError != nil })
	if !errors.Is(st.LastError, reconcile.ErrList) {
		t.Errorf("Status.LastError = %v; want ErrList", st.LastError)
	}
	cut := e.head()
	if cut >= n || st.Lists != 0 {
		t.Fatalf("after the cut: head %d, Lists %d; want under %d and 0 (no list complete)", cut, st.Lists, n)
	}
	e.proxy.Heal()

	// PagesTotal only grows: the new stream's batches, not the cut one's.
	pages := st.PagesTotal
	e.waitStatus("initial events under way again", func(s reconcile.Status) bool {
		return s.Phase == reconcile.PhaseListing && s.PagesTotal >= pages+10
	})
	e.proxy.Stall()
	st = e.waitStatus("the stall seen", func(s reconcile.Status) bool { return errors.Is(s.LastError, reconcile.ErrNoProgress) })
	if h := e.head(); h != cut || st.Lists != 0 {
		t.Fatalf("after the stall: head %d, Lists %d; want %d and 0 (the relist committed nothing half-way)", h, st.Lists, cut)
	}
	e.proxy.Heal()
	e.proxy.SetRate(0)

	st = e.waitStatus("list complete", watching(1))
	if st.ListMode != reconcile.ListModeStreaming {
		t.Errorf("Status.ListMode = %q (%s); want streaming: a cut is no refusal", st.ListMode, st.ListModeReason)
	}
	got, _ := e.eventsFrom(1)
	var want []string
	for i := range n {
		want = append(want, "ADDED "+largeName(i)+" relist")
	}
	equal(t, "initial events", got, want)
	e.checkIndex(e.j)
}

// A 429 with Retry-After to a streaming list is load shedding, not a
// refusal: the loop waits at least as long as asked and streams again; it
// never falls back to pages for it.
func TestLoop_StreamingList_Throttled_WaitsAndStreamsAgain(t *testing.T) {
	e := newEnv(t)
	e.create("a")
	var mu sync.Mutex
	var sent []time.Time
	cfg := e.cp.ProxiedRESTConfig(e.proxy)
	cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper {
		return roundTripFunc(func(req *http.Request) (*http.Response, error) {
			if req.URL.Query().Get("sendInitialEvents") != "true" {
				return rt.RoundTrip(req)
			}
			mu.Lock()
			sent = append(sent, time.Now())
			first := len(sent) == 1
			mu.Unlock()
			if !first {
				return rt.RoundTrip(req)
			}
			return &http.Response{Request: req, StatusCode: http.StatusTooManyRequests, Status: "429 Too Many Requests", ProtoMajor: 1, ProtoMinor: 1,
				Header: http.Header{"Content-Type": {"text/plain"}, "Retry-After": {"1"}},
				Body:   io.NopCloser(strings.NewReader("Too many requests, please try again later.\n"))}, nil
		})
	})
	e.start(cfg, testOptions(t))
	st := e.waitStatus("initial list", watching(1))
	if st.ListMode != reconcile.ListModeStreaming || st.Throttled != 1 {
		t.Errorf("Status.ListMode = %q, Throttled = %d; want streaming, 1", st.ListMode, st.Throttled)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(sent) != 2 {
		t.Fatalf("%d streaming list requests; want 2", len(sent))
	}
	if d := sent[1].Sub(sent[0]); d < time.Second {
		t.Errorf("second streaming list %v after the 429; want at least the Retry-After's 1s", d)
	}
	e.expectEvents("initial events", 1, []string{"ADDED a relist"})
}
