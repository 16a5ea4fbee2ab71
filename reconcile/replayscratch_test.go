package reconcile_test

import (
	"context"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"k8s.io/apimachinery/pkg/util/resourceversion"

	"github.com/watchjournal/watchjournal/reconcile"
)

// fromScratch makes every watch that resumes from a resourceVersion a
// watch without one, as an aggregated apiserver that ignores the
// resourceVersion of a watch serves it (every object as ADDED, then live
// events), and drops the bookmarks it would ask for. Streaming lists pass.
type fromScratch struct{ stripped atomic.Int32 }

func (f *fromScratch) wrap(rt http.RoundTripper) http.RoundTripper {
	return roundTripFunc(func(req *http.Request) (*http.Response, error) {
		q := req.URL.Query()
		if q.Get("watch") != "true" || q.Get("resourceVersion") == "" {
			return rt.RoundTrip(req)
		}
		f.stripped.Add(1)
		q.Del("resourceVersion")
		q.Del("resourceVersionMatch")
		q.Del("allowWatchBookmarks")
		r := req.Clone(req.Context())
		r.URL.RawQuery = q.Encode()
		return rt.RoundTrip(r)
	})
}

// rvMonitor records every Status.ResourceVersion the loop shows, and the
// moves that went backwards.
type rvMonitor struct {
	mu        sync.Mutex
	last      string
	backwards []string
}

func (m *rvMonitor) run(ctx context.Context, l *reconcile.Loop) {
	_ = l.WaitFor(ctx, func(s reconcile.Status) bool {
		m.mu.Lock()
		defer m.mu.Unlock()
		if s.ResourceVersion != "" && m.last != "" {
			if cmp, err := resourceversion.CompareResourceVersion(s.ResourceVersion, m.last); err == nil && cmp < 0 {
				m.backwards = append(m.backwards, m.last+" -> "+s.ResourceVersion)
			}
		}
		if s.ResourceVersion != "" {
			m.last = s.ResourceVersion
		}
		return false
	})
}

// A server that replays from scratch on resume. The
// index held d (the oldest) and a, b, c; while the loop was down a was
// updated and b deleted. The resumed watch streams a, c, d as ADDED, with
// c's and d's resourceVersions below the stored one. The journal's
// resourceVersion never goes back, the replay is noticed and relisted
// (DELETED b, the deletion the replay cannot show), a verify finds
// nothing, no live object is ever DELETED, and the index equals the
// server's list.
func TestLoop_ResumeReplayedFromScratch(t *testing.T) {
	e := newEnv(t)
	e.createAll("d", "a", "b", "c")
	f := &fromScratch{}
	cfg := e.wrapped(f.wrap)
	opts := testOptions(t)
	e.start(cfg, opts)
	waitSync(t, e.loop)
	h := e.head()
	e.stop()
	e.update("a")
	e.delete("b")

	e.start(cfg, opts)
	mon := &rvMonitor{}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go mon.run(ctx, e.loop)
	e.waitStatus("the replay relisted", func(s reconcile.Status) bool { return s.Replays >= 1 && s.Lists >= 1 && s.Synced })
	v := e.loop.Status().Verifies
	e.loop.Verify()
	e.waitStatus("a verify", func(s reconcile.Status) bool { return s.Verifies > v && s.Phase == reconcile.PhaseWatching })
	e.update("c") // a live event still arrives, once
	e.waitStatus("watching after the live event", func(s reconcile.Status) bool {
		got, _ := e.eventsFrom(h + 1)
		return len(got) > 0 && got[len(got)-1] == "MODIFIED c watch"
	})
	st := e.loop.Status()
	got, _ := e.eventsFrom(h + 1)
	for _, ev := range got {
		if strings.HasPrefix(ev, "DELETED") && !strings.HasPrefix(ev, "DELETED b ") {
			t.Errorf("a live object was DELETED: %q in %q", ev, got)
		}
	}
	equal(t, "journal after the restart", got, []string{"MODIFIED a restart", "DELETED b restart", "MODIFIED c watch"})
	// The verify's watch replays too: folded, not relisted again (one
	// replay relisted, not a relist per list).
	if st.Divergences != 0 || st.Replays != 1 || f.stripped.Load() < 2 {
		t.Errorf("divergences %d, replays relisted %d, watches made to replay %d; want 0, 1, at least 2 (%+v)", st.Divergences, st.Replays, f.stripped.Load(), st)
	}
	cancel()
	mon.mu.Lock()
	if len(mon.backwards) > 0 {
		t.Errorf("the journal's resourceVersion went backwards: %q", mon.backwards)
	}
	mon.mu.Unlock()
	e.checkIndex(e.j)
}
