package reconcile_test

import (
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"k8s.io/client-go/rest"

	"github.com/watchjournal/watchjournal/reconcile"
)

func watching(lists int) func(reconcile.Status) bool {
	return func(s reconcile.Status) bool { return s.Lists >= lists && s.Phase == reconcile.PhaseWatching }
}

// Acceptance 1, scenario S01: a 410 while disconnected leads to a relist
// whose diff emits exactly the missed changes, then a watch from the list's
// resourceVersion with no gap.
func TestLoop_GoneDuringWatch_RelistEmitsExactlyTheGap(t *testing.T) {
	e := newEnv(t)
	e.createAll("a", "b", "c")
	e.start(nil, testOptions(t))
	e.waitStatus("initial list", watching(1))
	e.expectEvents("initial events", 1, []string{"ADDED a relist", "ADDED b relist", "ADDED c relist"})
	h := e.head()

	e.proxy.Cut()
	e.update("a")
	e.delete("b")
	e.create("d")
	e.compact()
	e.proxy.Heal()

	st := e.waitStatus("relist after 410", watching(2))
	if st.Gone < 1 {
		t.Errorf("Status.Gone = %d; want at least 1", st.Gone)
	}
	got, evs := e.eventsFrom(h + 1)
	equal(t, "gap events", got, []string{"MODIFIED a relist", "DELETED b relist", "ADDED d relist"})
	for _, ev := range evs {
		if ev.Type == "DELETED" && (ev.Object != nil || !ev.Synthesized() || ev.UID == "") {
			t.Errorf("relist DELETED = %+v; want a synthesized tombstone with the old UID", ev)
		}
	}
	e.checkIndex(e.j)

	c := e.update("c")
	e.waitHead(h + 4)
	got, evs = e.eventsFrom(h + 4)
	equal(t, "live event after the relist", got, []string{"MODIFIED c watch"})
	if evs[0].ResourceVersion != c.ResourceVersion {
		t.Errorf("MODIFIED c resourceVersion = %s; want the server's %s", evs[0].ResourceVersion, c.ResourceVersion)
	}
	e.checkIndex(e.j)
}

// Acceptance 3, scenario S04: the same name with a new UID while away is
// DELETED (old UID) then ADDED (new UID), never MODIFIED; live, too.
func TestLoop_SameNameNewUID_DeletedThenAdded(t *testing.T) {
	e := newEnv(t)
	e.createAll("a", "b", "c")
	e.start(nil, testOptions(t))
	e.waitStatus("initial list", watching(1))
	old, _, _ := e.j.Lookup(e.ns + "/b")
	h := e.head()

	e.proxy.Cut()
	e.delete("b")
	nb := e.create("b")
	e.compact()
	e.proxy.Heal()
	e.waitStatus("relist after 410", watching(2))

	got, evs := e.eventsFrom(h + 1)
	equal(t, "gap events", got, []string{"DELETED b relist", "ADDED b relist"})
	if len(evs) == 2 && (evs[0].UID != old.UID || evs[1].UID != string(nb.UID)) {
		t.Errorf("UIDs = %s, %s; want old %s then new %s", evs[0].UID, evs[1].UID, old.UID, nb.UID)
	}
	e.checkIndex(e.j)

	// Live: the watch sees DELETED then ADDED.
	e.delete("c")
	e.create("c")
	e.waitHead(h + 4)
	e.expectEvents("live events", h+3, []string{"DELETED c watch", "ADDED c watch"})
	e.checkIndex(e.j)
}

// goneInjector answers the first watch from a chosen resourceVersion with a
// 410 in one of its two shapes and counts the requests made with it.
type goneInjector struct {
	mu        sync.Mutex
	staleRV   string
	shape     string // "status": HTTP 410 + Status; "event": HTTP 200 + ERROR event
	injected  bool
	staleReqs atomic.Int32
}

const goneStatus = `{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"too old resource version: 1 (2)","reason":"Expired","code":410}`

func (g *goneInjector) wrap(rt http.RoundTripper) http.RoundTripper {
	return roundTripFunc(func(req *http.Request) (*http.Response, error) {
		q := req.URL.Query()
		g.mu.Lock()
		stale := q.Get("watch") == "true" && g.staleRV != "" && q.Get("resourceVersion") == g.staleRV
		inject := stale && !g.injected
		if inject {
			g.injected = true
		}
		g.mu.Unlock()
		if stale {
			g.staleReqs.Add(1)
		}
		if !inject {
			return rt.RoundTrip(req)
		}
		resp := &http.Response{Request: req, Header: http.Header{"Content-Type": {"application/json"}}, ProtoMajor: 1, ProtoMinor: 1}
		if g.shape == "status" {
			resp.StatusCode, resp.Status = http.StatusGone, "410 Gone"
			resp.Body = io.NopCloser(strings.NewReader(goneStatus))
		} else {
			resp.StatusCode, resp.Status = http.StatusOK, "200 OK"
			resp.Body = io.NopCloser(strings.NewReader(`{"type":"ERROR","object":` + goneStatus + "}\n"))
		}
		return resp, nil
	})
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// Acceptance 4, scenario S02: both shapes of 410 lead to one relist, with at
// most one request from the stale resourceVersion and no reconnect loop.
func TestLoop_GoneInBothShapes(t *testing.T) {
	for _, shape := range []string{"status", "event"} {
		t.Run(fmt.Sprintf("410 as %s", shape), func(t *testing.T) {
			e := newEnv(t)
			e.create("a")
			g := &goneInjector{shape: shape}
			cfg := e.wrapped(g.wrap)
			e.start(cfg, testOptions(t))
			st := e.waitStatus("initial list", watching(1))
			h := e.head()

			g.mu.Lock()
			g.staleRV = st.ResourceVersion
			g.mu.Unlock()
			e.proxy.Cut()
			e.create("e")
			e.proxy.Heal()

			st = e.waitStatus("relist after the injected 410", watching(2))
			if st.Gone != 1 {
				t.Errorf("Status.Gone = %d; want 1", st.Gone)
			}
			e.expectEvents("events after the 410", h+1, []string{"ADDED e relist"})
			if n := g.staleReqs.Load(); n != 1 {
				t.Errorf("watch requests with the stale resourceVersion = %d; want 1", n)
			}
			e.checkIndex(e.j)
		})
	}
}

var _ = rest.CopyConfig

// One write, then compaction at exactly its revision: a watch from the
// resourceVersion before it gets neither a 410 nor the event, but a 500
// ("etcd event received with PrevKv=nil") on every try (kube-apiserver
// v1.37, watch cache off). The loop relists after a few refusals and
// journals the change once.
func TestLoop_CompactedAtTheNextRevision_Relists(t *testing.T) {
	e := newEnv(t)
	e.create("a")
	h := e.startListed(nil, testOptions(t))
	e.proxy.Cut()
	e.update("a")
	e.compact()
	e.proxy.Heal()
	e.waitStatus("relist", watching(2))
	e.expectEvents("events", h+1, []string{"MODIFIED a relist"})
	e.checkIndex(e.j)
}
