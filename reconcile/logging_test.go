package reconcile_test

import (
	"encoding/json"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/go-logr/logr/funcr"

	"github.com/watchjournal/watchjournal/reconcile"
)

// logLines collects a funcr JSON logger's lines.
type logLines struct {
	mu    sync.Mutex
	lines []map[string]any
}

func (l *logLines) add(obj string) {
	var m map[string]any
	if json.Unmarshal([]byte(obj), &m) == nil {
		l.mu.Lock()
		l.lines = append(l.lines, m)
		l.mu.Unlock()
	}
}

// with returns the lines whose msg starts with prefix.
func (l *logLines) with(prefix string) []map[string]any {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []map[string]any
	for _, m := range l.lines {
		if msg, _ := m["msg"].(string); strings.HasPrefix(msg, prefix) {
			out = append(out, m)
		}
	}
	return out
}

// The loop logs through the logr.Logger it is given: state changes at
// V(0) with the key resource, a failure once through Error, and its
// repeats at V(1).
func TestLoop_LogsThroughLogr(t *testing.T) {
	e := newEnv(t)
	e.create("a")
	f := &failPages{all: true, code: http.StatusServiceUnavailable, on: true}
	cfg := e.wrapped(f.wrap)
	logs := &logLines{}
	opts := pagedOptions(t)
	opts.Logger = funcr.NewJSON(logs.add, funcr.Options{Verbosity: 1})
	e.start(cfg, opts)
	e.waitStatus("three failed lists", func(s reconcile.Status) bool { return s.Backoffs >= 3 })
	f.set(false)
	e.waitStatus("initial list", watching(1))

	backoffs := logs.with("backing off")
	if len(backoffs) < 3 {
		t.Fatalf("backoff lines = %v; want at least 3", backoffs)
	}
	for i, m := range backoffs {
		_, isError := m["error"]
		if i == 0 && (!isError || m["level"] != nil && m["level"] != 0.0) {
			t.Errorf("first backoff line = %v; want an Error line (an \"error\" key)", m)
		}
		if i > 0 && m["level"] != 1.0 {
			t.Errorf("backoff line %d = %v; want V(1) (a repeat of the same failure)", i, m)
		}
		if m["resource"] != "configmaps.v1 -n "+e.ns {
			t.Errorf("backoff line %d = %v; want the resource key", i, m)
		}
	}
	if synced := logs.with("synced"); len(synced) != 1 || synced[0]["level"] != 0.0 {
		t.Errorf("synced lines = %v; want one at V(0)", synced)
	}
}
