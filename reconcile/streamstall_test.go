package reconcile_test

import (
	"errors"
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	"github.com/watchjournal/watchjournal/reconcile"
)

// hungStreams answers the first n streaming lists (sendInitialEvents=true)
// with a 200 whose body passes no byte until the request ends, as an
// apiserver does whose conversion webhook hangs on the first object; later
// ones reach the server.
type hungStreams struct {
	n, streams atomic.Int32
}

func (h *hungStreams) wrap(rt http.RoundTripper) http.RoundTripper {
	return roundTripFunc(func(req *http.Request) (*http.Response, error) {
		if req.URL.Query().Get("sendInitialEvents") != "true" {
			return rt.RoundTrip(req)
		}
		if h.streams.Add(1) > h.n.Load() {
			return rt.RoundTrip(req)
		}
		return &http.Response{Request: req, StatusCode: http.StatusOK, Status: "200 OK", ProtoMajor: 1, ProtoMinor: 1,
			Header: http.Header{"Content-Type": {"application/json"}}, Body: &blockedBody{done: req.Context().Done()}}, nil
	})
}

// blockedBody is a response body that passes no byte until done.
type blockedBody struct{ done <-chan struct{} }

func (b *blockedBody) Read([]byte) (int, error) {
	<-b.done
	return 0, errors.New("request ended")
}

func (b *blockedBody) Close() error { return nil }

// A streaming list that hangs (no frame within
// ProgressTimeout on a collection that holds objects: a hung conversion
// webhook) is a stall, not a refusal: the loop tries the streaming list
// again and never falls back to pages.
func TestLoop_StreamingList_Hung_NotARefusal(t *testing.T) {
	e := newEnv(t)
	e.create("a")
	e.create("b")
	h := &hungStreams{}
	h.n.Store(2)
	cfg := e.wrapped(h.wrap)
	opts := testOptions(t)
	opts.ProgressTimeout = time.Second
	e.start(cfg, opts)
	var paged []reconcile.Status
	st := e.waitStatus("synced", func(s reconcile.Status) bool {
		if s.ListMode == reconcile.ListModePaginated {
			paged = append(paged, s)
		}
		return s.Synced || len(paged) > 0
	})
	if len(paged) > 0 {
		t.Fatalf("the loop took a hung streaming list for a refusal: status %+v", paged[0])
	}
	if st.ListMode != reconcile.ListModeStreaming || st.Lists != 1 || h.streams.Load() < 3 {
		t.Errorf("at sync: list mode %q (%s), lists %d, streaming list requests %d; want streaming, 1 list, after 2 hung ones and at least 1 served",
			st.ListMode, st.ListModeReason, st.Lists, h.streams.Load())
	}
	if st.Backoffs < 2 {
		t.Errorf("at sync: %d backoffs; want one after each hung streaming list", st.Backoffs)
	}
	e.expectEvents("journal", 1, []string{"ADDED a relist", "ADDED b relist"})
	e.checkIndex(e.j)
}
