package reconcile_test

import (
	"bufio"
	"bytes"
	"io"
	"net/http"
	"sync"
	"testing"

	"github.com/watchjournal/watchjournal/reconcile"
)

// dropOnce removes, once, the first watch frame that contains all of parts.
type dropOnce struct {
	mu      sync.Mutex
	parts   []string
	dropped bool
}

func (d *dropOnce) wrap(rt http.RoundTripper) http.RoundTripper {
	return roundTripFunc(func(req *http.Request) (*http.Response, error) {
		resp, err := rt.RoundTrip(req)
		if err != nil || req.URL.Query().Get("watch") != "true" || resp.StatusCode != http.StatusOK {
			return resp, err
		}
		pr, pw := io.Pipe()
		body := resp.Body
		go func() {
			r := bufio.NewReader(body)
			for {
				line, err := r.ReadBytes('\n')
				if len(line) > 0 && !d.drop(line) {
					if _, werr := pw.Write(line); werr != nil {
						_ = body.Close()
						return
					}
				}
				if err != nil {
					pw.CloseWithError(err)
					return
				}
			}
		}()
		resp.Body = struct {
			io.Reader
			io.Closer
		}{pr, closerFunc(func() error { _ = pr.Close(); return body.Close() })}
		return resp, nil
	})
}

func (d *dropOnce) drop(line []byte) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.dropped {
		return false
	}
	for _, p := range d.parts {
		if !bytes.Contains(line, []byte(p)) {
			return false
		}
	}
	d.dropped = true
	return true
}

type closerFunc func() error

func (f closerFunc) Close() error { return f() }

// Scenario S14: a DELETED lost from the stream leaves b wrongly indexed;
// a verify (anti-entropy relist) journals exactly one synthesized DELETED b
// and counts the divergence.
func TestLoop_LostEvent_RepairedByVerify(t *testing.T) {
	e := newEnv(t)
	e.create("a")
	e.create("b")
	d := &dropOnce{parts: []string{`"type":"DELETED"`, `"name":"b"`}}
	cfg := e.cp.ProxiedRESTConfig(e.proxy)
	cfg.Wrap(d.wrap)
	e.start(cfg, testOptions(t))
	e.waitStatus("initial list", watching(1))
	h := e.head()

	e.delete("b")
	e.update("a")
	e.waitHead(h + 1)
	got, _ := e.eventsFrom(h + 1)
	equal(t, "events with the DELETED lost", got, []string{"MODIFIED a watch"})
	if _, ok, _ := e.j.Lookup(e.ns + "/b"); !ok || !d.dropped {
		t.Fatalf("b not indexed after the lost DELETED (dropped %v): the test is not testing", d.dropped)
	}

	e.loop.Verify()
	st := e.waitStatus("verify", func(s reconcile.Status) bool { return s.Verifies == 1 && s.Phase == reconcile.PhaseWatching })
	if st.Divergences != 1 || st.LastVerifyFirst != h+2 || st.LastVerifyLast != h+2 {
		t.Errorf("Status divergences %d at offsets %d..%d; want 1 at %d", st.Divergences, st.LastVerifyFirst, st.LastVerifyLast, h+2)
	}
	got, evs := e.eventsFrom(h + 2)
	equal(t, "events after verify", got, []string{"DELETED b relist"})
	if len(evs) == 1 && !evs[0].Synthesized() {
		t.Errorf("DELETED b is not flagged synthesized")
	}
	e.checkIndex(e.j)

	// A second verify with nothing diverged finds nothing.
	e.loop.Verify()
	st = e.waitStatus("second verify", func(s reconcile.Status) bool { return s.Verifies == 2 && s.Phase == reconcile.PhaseWatching })
	if st.Divergences != 1 || e.head() != h+2 {
		t.Errorf("after a clean verify: divergences %d, head %d; want 1, %d", st.Divergences, e.head(), h+2)
	}
}
