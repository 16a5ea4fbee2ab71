package reconcile_test

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/watchjournal/watchjournal/reconcile"
)

// hugeFrame serves, once armed, one watch request with a 200 whose body is
// a single well-formed ADDED frame of ConfigMap "huge" with 17 MiB of data:
// past the 16 MiB bound.
type hugeFrame struct {
	ns       string
	armed    atomic.Bool
	injected atomic.Int32
}

func (h *hugeFrame) wrap(rt http.RoundTripper) http.RoundTripper {
	return roundTripFunc(func(req *http.Request) (*http.Response, error) {
		if req.URL.Query().Get("watch") != "true" || !h.armed.CompareAndSwap(true, false) {
			return rt.RoundTrip(req)
		}
		h.injected.Add(1)
		head := fmt.Sprintf(`{"type":"ADDED","object":{"kind":"ConfigMap","apiVersion":"v1","metadata":{"name":"huge","namespace":%q,"uid":"00000000-0000-0000-0000-000000000001","resourceVersion":"999999999"},"data":{"v":"`, h.ns)
		body := io.MultiReader(strings.NewReader(head), io.LimitReader(repeatByte('x'), 17<<20), strings.NewReader("\"}}}\n"))
		return &http.Response{StatusCode: http.StatusOK, Status: "200 OK", Request: req, ProtoMajor: 1, ProtoMinor: 1,
			Header: http.Header{"Content-Type": {"application/json"}}, Body: io.NopCloser(body)}, nil
	})
}

// repeatByte reads as an endless run of b.
type repeatByte byte

func (r repeatByte) Read(p []byte) (int, error) {
	for i := range p {
		p[i] = byte(r)
	}
	return len(p), nil
}

// A watch frame larger than the 16 MiB bound fails the watch with
// ErrFrameTooLarge; nothing of it is journaled, the loop does not stop, and
// the next watch journals what happens next. (Without the bound the 17 MiB
// frame would be decoded and journaled.)
func TestLoop_OversizedWatchFrame_TypedErrorNothingJournaled(t *testing.T) {
	e := newEnv(t)
	e.create("a")
	h := &hugeFrame{ns: e.ns}
	cfg := e.wrapped(h.wrap)
	head := e.startListed(cfg, testOptions(t))

	h.armed.Store(true)
	e.proxy.Cut() // the open watch ends; the next one gets the huge frame
	e.proxy.Heal()
	st := e.waitStatus("ErrFrameTooLarge", func(s reconcile.Status) bool { return errors.Is(s.LastError, reconcile.ErrFrameTooLarge) })
	if !errors.Is(st.LastError, reconcile.ErrWatch) || h.injected.Load() != 1 {
		t.Errorf("LastError = %v after %d injected frames; want ErrWatch wrapping ErrFrameTooLarge after 1", st.LastError, h.injected.Load())
	}
	select {
	case err := <-e.done:
		t.Fatalf("Run returned %v after an oversized frame; want it to go on", err)
	default:
	}

	e.create("b")
	e.waitHead(head + 1)
	e.waitStatus("watching, error cleared", func(s reconcile.Status) bool {
		return s.Phase == reconcile.PhaseWatching && s.LastError == nil
	})
	e.expectEvents("events after the oversized frame", head+1, []string{"ADDED b watch"})
	e.checkIndex(e.j)
}
