package reconcile_test

import (
	"net/http"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// The discovery retry for a kind New could not record lives within Run. While
// Run runs it retries; once Run has returned no goroutine of the loop is left
// to poll discovery.
func TestLoop_KindRetry_EndsWithRun(t *testing.T) {
	e := newEnv(t)
	e.create("a")
	var discovery atomic.Int32
	retried := make(chan struct{})
	cfg := e.cp.ProxiedRESTConfig(e.proxy)
	cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper {
		return roundTripFunc(func(req *http.Request) (*http.Response, error) {
			if req.URL.Path == "/api/v1" { // discovery of core/v1: down
				if discovery.Add(1) == 2 {
					close(retried)
				}
				return &http.Response{Request: req, StatusCode: http.StatusServiceUnavailable, Status: "503 Service Unavailable",
					Header: http.Header{}, Body: http.NoBody, ProtoMajor: 1, ProtoMinor: 1}, nil
			}
			return rt.RoundTrip(req)
		})
	})
	e.start(cfg, testOptions(t))
	e.waitStatus("initial list", watching(1))
	// The retry runs under Run: a second discovery request comes (after
	// its first backoff, 1 s).
	select {
	case <-retried:
	case <-time.After(60 * time.Second):
		t.Fatalf("discovery requests %d; want a retry while Run runs", discovery.Load())
	}
	j := e.j
	e.cancel()
	if err := <-e.done; err != nil {
		t.Fatalf("Run = %v; want nil after cancel", err)
	}
	e.loop = nil // Run has returned: the journal stays open, as a caller may keep it
	defer j.Close()
	buf := make([]byte, 1<<20)
	stacks := string(buf[:runtime.Stack(buf, true)])
	if strings.Contains(stacks, "reconcile.retryKind") || strings.Contains(stacks, "reconcile.(*Loop).retryKind") {
		t.Fatalf("after Run returned, a goroutine still retries discovery (%d requests so far):\n%s", discovery.Load(), stacks)
	}
	res, _, err := j.Resource()
	if err != nil {
		t.Fatal(err)
	}
	if res.Kind != "" {
		t.Errorf("kind recorded as %q through a discovery that always failed", res.Kind)
	}
}
