package reconcile_test

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"testing"
	"time"

	"github.com/watchjournal/watchjournal/reconcile"
)

// Pages that break key order (a server that does not list in etcd key
// order) make the relist start again and find deletions by lookup; the
// result is the same.
func TestLoop_UnorderedPages_FallBackToLookups(t *testing.T) {
	e := newEnv(t)
	e.createAll("a", "b", "c", "d", "e")
	cfg := e.cp.ProxiedRESTConfig(e.proxy)
	cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper {
		return roundTripFunc(func(req *http.Request) (*http.Response, error) {
			resp, err := rt.RoundTrip(req)
			if err != nil || req.URL.Query().Get("watch") == "true" || resp.StatusCode != http.StatusOK {
				return resp, err
			}
			// Reverse the items of every list page.
			body, _ := io.ReadAll(resp.Body)
			var l map[string]json.RawMessage
			var items []json.RawMessage
			if json.Unmarshal(body, &l) == nil && json.Unmarshal(l["items"], &items) == nil {
				for i, k := 0, len(items)-1; i < k; i, k = i+1, k-1 {
					items[i], items[k] = items[k], items[i]
				}
				l["items"], _ = json.Marshal(items)
				body, _ = json.Marshal(l)
			}
			resp.Body = io.NopCloser(bytes.NewReader(body))
			resp.ContentLength = int64(len(body))
			resp.Header.Del("Content-Length")
			return resp, nil
		})
	})
	e.start(cfg, pagedOptions(t)) // PageSize 2: pages come reversed
	e.waitStatus("initial list", watching(1))
	got, _ := e.eventsFrom(1)
	if len(got) != 5 {
		t.Fatalf("initial events = %q; want five ADDED", got)
	}
	h := e.head()

	e.proxy.Cut()
	e.update("a")
	e.delete("c")
	e.create("f")
	e.compact()
	e.proxy.Heal()
	e.waitStatus("relist after 410", watching(2))
	e.expectEvents("gap events (page order)", h+1, []string{"MODIFIED a relist", "ADDED f relist", "DELETED c relist"})
	e.checkIndex(e.j)
}

// A watch that the server ends normally (timeoutSeconds) resumes from the
// last resourceVersion: no event lost, none repeated, no relist.
func TestLoop_WatchEndedByServer_Resumes(t *testing.T) {
	e := newEnv(t)
	e.create("a")
	opts := testOptions(t)
	opts.WatchTimeout = time.Second // the server ends each watch after 1-2 s
	h := e.startListed(nil, opts)
	for i := uint64(1); i <= 3; i++ {
		w := e.loop.Status().Watches
		e.waitStatus("the server ends the watch and the loop resumes", func(s reconcile.Status) bool { return s.Watches > w })
		e.update("a")
		e.waitHead(h + i)
	}
	e.expectEvents("events across server-ended watches", h+1, []string{"MODIFIED a watch", "MODIFIED a watch", "MODIFIED a watch"})
	if st := e.loop.Status(); st.Lists != 1 || st.Gone != 0 {
		t.Errorf("Status = %+v; want no relist and no 410", st)
	}
	e.checkIndex(e.j)
}
