package reconcile_test

import (
	"bufio"
	"bytes"
	"io"
	"net/http"
	"sync"
	"testing"
	"time"

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
	cfg := e.wrapped(d.wrap)
	opts := testOptions(t)
	opts.Wire = reconcile.WireJSON // dropOnce reads JSON frames, a line each
	h := e.startListed(cfg, opts)

	e.delete("b")
	e.update("a")
	e.waitHead(h + 1)
	e.expectEvents("events with the DELETED lost", h+1, []string{"MODIFIED a watch"})
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

// The verify interval is wall-clock across watches. With
// IdleTimeout 1 s every watch on a quiet resource ends within a second;
// with VerifyInterval 3 s (± 20%) verifies still happen, on time.
func TestLoop_VerifyInterval_LongerThanAWatch(t *testing.T) {
	e := newEnv(t)
	e.create("a")
	opts := testOptions(t)
	opts.IdleTimeout = time.Second
	opts.VerifyInterval = 3 * time.Second
	e.start(nil, opts)
	e.waitStatus("initial list", watching(1))
	began := time.Now()
	st := e.waitStatus("two periodic verifies", func(s reconcile.Status) bool { return s.Verifies >= 2 })
	took := time.Since(began)
	t.Logf("%d verifies and %d idle restarts in %v", st.Verifies, st.IdleRestarts, took)
	if st.IdleRestarts < 2 {
		t.Errorf("IdleRestarts = %d; want at least 2: the watches must have ended before the interval", st.IdleRestarts)
	}
	if st.Divergences != 0 {
		t.Errorf("Divergences = %d on a quiet resource; want 0", st.Divergences)
	}
	if took > 15*time.Second {
		t.Errorf("two verifies took %v; want about 6 s (2 × 3 s ± 20%%, plus the lists)", took)
	}
}

// Verify compares like with like. Hundreds of updates
// while verifying again and again: no divergence is reported, since the
// watch lost nothing, and the index equals the server afterwards.
func TestLoop_Verify_UnderWrites_NoFalseDivergences(t *testing.T) {
	e := newEnv(t)
	names := []string{"a", "b", "c", "d", "e"}
	for _, n := range names {
		e.create(n)
	}
	opts := testOptions(t)
	opts.VerifyInterval = -1 // only the verifies this test asks for
	e.start(nil, opts)
	e.waitStatus("initial list", watching(1))

	const updates = 300
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := 0; i < updates; i++ {
			e.update(names[i%len(names)])
		}
	}()
	verifies := 0
writing:
	for {
		select {
		case <-done:
			break writing
		default:
		}
		e.loop.Verify()
		verifies++
		e.waitStatus("verify", func(s reconcile.Status) bool { return s.Verifies >= verifies })
	}
	st := e.loop.Status()
	t.Logf("%d updates, %d verifies during them: %d divergences", updates, st.Verifies, st.Divergences)
	if st.Verifies < 5 {
		t.Errorf("only %d verifies ran during the writes; want at least 5: the test is not testing", st.Verifies)
	}
	if st.Divergences != 0 {
		t.Errorf("Divergences = %d under writes with nothing lost; want 0", st.Divergences)
	}
	// The journal settles on the server's state: once the last write is
	// indexed, every earlier one is.
	last := e.update("a")
	e.waitStatus("the last update applied", func(reconcile.Status) bool {
		entry, ok, _ := e.j.Lookup(e.ns + "/a")
		return ok && entry.ResourceVersion == last.ResourceVersion
	})
	e.checkIndex(e.j)
}
