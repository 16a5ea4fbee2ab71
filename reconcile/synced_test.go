package reconcile_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/watchjournal/watchjournal/reconcile"
)

// HasSynced after a restart is true only
// once the journal is known current with the server; with the apiserver's
// watch cache off (the watch reads etcd) and on (the watch is served from
// the cache, the resume check's lists from etcd).
func TestLoop_HasSynced_Restart(t *testing.T) {
	for _, wc := range []bool{false, true} {
		newEnv := newEnv
		if wc {
			newEnv = watchCacheEnv
		}
		t.Run(fmt.Sprintf("watchCache=%v", wc), func(t *testing.T) { testHasSyncedRestart(t, newEnv) })
	}
}

func testHasSyncedRestart(t *testing.T, newEnv func(*testing.T) *env) {
	t.Run("stored resourceVersion compacted: not synced until the restart relist is committed", func(t *testing.T) {
		e := newEnv(t)
		e.createAll("a", "b", "c")
		e.start(nil, testOptions(t))
		waitSync(t, e.loop)
		if st := e.loop.Status(); st.SyncedOffset != 3 || st.Lists != 1 {
			t.Fatalf("after the initial list: SyncedOffset %d, lists %d; want 3, 1", st.SyncedOffset, st.Lists)
		}
		h := e.head()
		e.stop()

		e.delete("b")
		e.create("d")
		e.compact()

		e.start(nil, testOptions(t))
		// Read the journal at the first status in which Synced is true.
		var atSync []string
		var st reconcile.Status
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		err := e.loop.WaitFor(ctx, func(s reconcile.Status) bool {
			if !s.Synced {
				return false
			}
			atSync, _ = e.eventsFrom(h + 1)
			st = s
			return true
		})
		if err != nil {
			t.Fatalf("not synced: %v; status %+v", err, e.loop.Status())
		}
		// With the watch cache on, the cache may still serve the history
		// that etcd compacted: the resume is then not stale, and the watch
		// delivers the changes.
		want := []string{"DELETED b restart", "ADDED d restart"}
		if st.Lists == 0 && len(atSync) > 0 && atSync[0] == "DELETED b watch" {
			want = []string{"DELETED b watch", "ADDED d watch"}
		} else if st.Gone != 1 || st.Lists != 1 {
			t.Errorf("status at sync: gone %d, lists %d; want 1, 1 (%+v)", st.Gone, st.Lists, st)
		}
		equal(t, "journal when HasSynced turned true", atSync, want)
		if st.SyncedOffset != h+2 {
			t.Errorf("status at sync: SyncedOffset %d; want %d (%+v)", st.SyncedOffset, h+2, st)
		}
		e.checkIndex(e.j)
	})

	t.Run("stored resourceVersion still served: synced promptly with zero events", func(t *testing.T) {
		e := newEnv(t)
		e.createAll("a", "b")
		e.start(nil, testOptions(t))
		waitSync(t, e.loop)
		h := e.head()
		e.stop()
		// Writes elsewhere move the server's resourceVersion past the stored one.
		other := newEnv(t)
		other.create("x")

		began := time.Now()
		e.start(nil, testOptions(t))
		if e.loop.HasSynced() {
			t.Fatalf("HasSynced before the loop checked anything")
		}
		waitSync(t, e.loop)
		took := time.Since(began)
		st := e.loop.Status()
		t.Logf("synced %v after the restart: %+v", took, st)
		// The restart's verify may have listed since:
		// it finds nothing, and is the only list.
		if st.Lists != st.Verifies || st.Gone != 0 || e.head() != h || st.SyncedOffset != h {
			t.Errorf("status at sync %+v, head %d; want no list but the restart's verify, no 410, head and SyncedOffset %d", st, e.head(), h)
		}
		if st.SyncedBy == "" || st.SyncedBy == "list" {
			t.Errorf("synced by %q; want a proof of the resume (current, caught up, served)", st.SyncedBy)
		}
	})
}

func waitSync(t *testing.T, l *reconcile.Loop) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if err := l.WaitForSync(ctx); err != nil {
		t.Fatalf("WaitForSync = %v; status %+v", err, l.Status())
	}
}

// WaitForSync returns the context's error, and ErrStopped once Run ended
// before it synced.
func TestLoop_WaitForSync_Stopped(t *testing.T) {
	e := newEnv(t)
	e.create("a")
	cfg := e.cp.ProxiedRESTConfig(e.proxy)
	e.proxy.Cut() // nothing answers: the loop cannot sync
	e.start(cfg, testOptions(t))
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	if err := e.loop.WaitForSync(ctx); err != context.DeadlineExceeded {
		t.Fatalf("WaitForSync with the server cut = %v; want context.DeadlineExceeded", err)
	}
	l := e.loop
	e.stop()
	if err := l.WaitForSync(context.Background()); err != reconcile.ErrStopped {
		t.Fatalf("WaitForSync after Run returned = %v; want ErrStopped", err)
	}
}

// lateGone answers the first watch from rv with a 200 whose ERROR 410
// frame comes only once release is closed, as from a server (or a proxy
// in front of it) slow to say the resourceVersion is gone.
type lateGone struct {
	rv       string
	release  chan struct{}
	answered chan struct{} // closed when the watch got its 200
	once     sync.Once
}

func (g *lateGone) wrap(rt http.RoundTripper) http.RoundTripper {
	return roundTripFunc(func(req *http.Request) (*http.Response, error) {
		q := req.URL.Query()
		first := false
		if q.Get("watch") == "true" && q.Get("resourceVersion") == g.rv {
			g.once.Do(func() { first = true })
		}
		if !first {
			return rt.RoundTrip(req)
		}
		defer close(g.answered)
		body := &lateBody{release: g.release, done: req.Context().Done(),
			frame: strings.NewReader(`{"type":"ERROR","object":` + goneStatus + "}\n")}
		return &http.Response{Request: req, StatusCode: http.StatusOK, Status: "200 OK", ProtoMajor: 1, ProtoMinor: 1,
			Header: http.Header{"Content-Type": {"application/json"}}, Body: body}, nil
	})
}

// lateBody passes no byte until release is closed, then frame, then ends.
type lateBody struct {
	release, done <-chan struct{}
	frame         io.Reader
}

func (b *lateBody) Read(p []byte) (int, error) {
	select {
	case <-b.release:
	case <-b.done:
		return 0, errors.New("request ended")
	}
	return b.frame.Read(p)
}

func (b *lateBody) Close() error { return nil }

// HasSynced rests on what the server says, never on a
// quiet interval. The stored resourceVersion is still served to a list
// (the resume check passes), but the watch from it is answered 200 and
// its 410 comes late: HasSynced stays false until the 410 is met, the
// relist is committed, and the journal holds what the relist found.
func TestLoop_HasSynced_Late410(t *testing.T) {
	e := newEnv(t)
	e.createAll("a", "b")
	e.start(nil, testOptions(t))
	waitSync(t, e.loop)
	stored, err := e.j.ResourceVersion()
	if err != nil {
		t.Fatal(err)
	}
	h := e.head()
	e.stop()
	e.delete("b")

	g := &lateGone{rv: stored, release: make(chan struct{}), answered: make(chan struct{})}
	cfg := e.wrapped(g.wrap)
	e.start(cfg, testOptions(t))
	select {
	case <-g.answered:
	case <-time.After(60 * time.Second):
		t.Fatalf("the watch from the stored resourceVersion %s never came; status %+v", stored, e.loop.Status())
	}
	// A quiet interval is no proof: well past one, still not synced.
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	err = e.loop.WaitFor(ctx, func(s reconcile.Status) bool { return s.Synced })
	cancel()
	if err == nil {
		close(g.release)
		t.Fatalf("HasSynced true while the watch's 410 was on its way: status %+v", e.loop.Status())
	}
	close(g.release)
	var st reconcile.Status // the first status with Synced true
	e.waitStatus("synced after the relist", func(s reconcile.Status) bool { st = s; return s.Synced })
	if st.Gone != 1 || st.Lists != 1 || st.SyncedBy != "list" {
		t.Errorf("status at sync: gone %d, lists %d, synced by %q; want 1, 1, list (%+v)", st.Gone, st.Lists, st.SyncedBy, st)
	}
	e.expectEvents("journal after the restart", h+1, []string{"DELETED b restart"})
	e.checkIndex(e.j)
}
