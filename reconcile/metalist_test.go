package reconcile_test

import (
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/watchjournal/watchjournal/reconcile"
)

// listCounter counts list page requests by representation. One-item lists
// (limit=1: the resume check and the verify's check that the applied
// resourceVersion is served, probe.go and verify.go) are not pages.
type listCounter struct {
	mu         sync.Mutex
	meta, full int
}

func (c *listCounter) wrap(rt http.RoundTripper) http.RoundTripper {
	return roundTripFunc(func(req *http.Request) (*http.Response, error) {
		// List requests only: New's discovery request (/api/v1) is not a
		// page, and neither is the resume check's one-item list.
		if q := req.URL.Query(); q.Get("watch") != "true" && q.Get("limit") != "1" && strings.HasSuffix(req.URL.Path, "/configmaps") {
			c.mu.Lock()
			if strings.Contains(req.Header.Get("Accept"), "as=PartialObjectMetadataList") {
				c.meta++
			} else {
				c.full++
			}
			c.mu.Unlock()
		}
		return rt.RoundTrip(req)
	})
}

func (c *listCounter) take() (meta, full int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	meta, full, c.meta, c.full = c.meta, c.full, 0, 0
	return meta, full
}

// A relist reads metadata only, and a page in full only when it holds a
// change: an unchanged relist of three pages costs three small requests;
// one change costs one full page more, and the event carries the object.
// A first list (empty index: nothing to diff) reads each page once, in
// full.
func TestLoop_Relist_MetadataPagesAndFullPagesOnlyForChanges(t *testing.T) {
	e := newEnv(t)
	e.createAll("a", "b", "c", "d", "e", "f")
	lc := &listCounter{}
	cfg := e.wrapped(lc.wrap)
	opts := testOptions(t)
	opts.ListMode = reconcile.ListModePaginated
	e.start(cfg, opts) // PageSize 2: three pages
	e.waitStatus("initial list", watching(1))
	if meta, full := lc.take(); meta != 0 || full != 3 {
		t.Errorf("initial list: %d metadata pages, %d full pages; want 0 and 3 (one read per page)", meta, full)
	}
	got, evs := e.eventsFrom(1)
	equal(t, "initial events", got, []string{"ADDED a relist", "ADDED b relist", "ADDED c relist", "ADDED d relist", "ADDED e relist", "ADDED f relist"})
	if len(evs) > 0 && !strings.Contains(string(evs[0].Object), `"kind":"ConfigMap"`) {
		t.Errorf("ADDED a object = %s; want the full ConfigMap", evs[0].Object)
	}
	h := e.head()

	e.loop.Verify() // nothing changed
	e.waitStatus("verify", func(s reconcile.Status) bool { return s.Verifies == 1 && s.Phase == reconcile.PhaseWatching })
	if meta, full := lc.take(); meta != 3 || full != 0 {
		t.Errorf("unchanged relist: %d metadata pages, %d full pages; want 3 and 0", meta, full)
	}

	e.proxy.Cut()
	e.update("c") // page 2
	e.compact()
	e.proxy.Heal()
	e.waitStatus("relist after 410", watching(3))
	if meta, full := lc.take(); meta != 3 || full != 1 {
		t.Errorf("relist with one change: %d metadata pages, %d full pages; want 3 and 1", meta, full)
	}
	got, evs = e.eventsFrom(h + 1)
	equal(t, "events", got, []string{"MODIFIED c relist"})
	if len(evs) == 1 && !strings.Contains(string(evs[0].Object), `"kind":"ConfigMap"`) {
		t.Errorf("MODIFIED c object = %s; want the full ConfigMap", evs[0].Object)
	}
	e.checkIndex(e.j)
}
