package reconcile_test

import (
	"fmt"
	"io"
	"net/http"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/watchjournal/watchjournal/reconcile"
)

// A slow link finishes a list. 40 ConfigMaps of 500 KiB
// (20 MiB) are one page of 500; through a proxy at 3 MiB/s the page's body
// takes about 7 s, longer than RequestTimeout (2 s), which bounds only the
// time to first byte: the list completes, then a relist of every object
// after a 410 does too, and the index equals the server. (A timeout on
// the whole page would cut it every time and the list would start again
// from page one, forever.)
func TestLoop_SlowLink_PageLongerThanRequestTimeoutCompletes(t *testing.T) {
	if testing.Short() {
		t.Skip("creates 20 MiB of ConfigMaps")
	}
	const (
		objects = 40
		size    = 500 << 10
		rate    = 3 << 20
	)
	e := newEnv(t)
	createLarge(t, e, objects, size)
	e.proxy.SetRate(rate)
	opts := testOptions(t)
	opts.PageSize = 500
	opts.RequestTimeout = 2 * time.Second
	opts.ProgressTimeout = 2 * time.Second
	start := time.Now()
	e.start(nil, opts)
	e.waitStatus("initial list through a slow link", watching(1))
	took := time.Since(start)
	t.Logf("initial list of %d × %d KiB at %d MiB/s: %v", objects, size>>10, rate>>20, took)
	if took < opts.RequestTimeout+time.Second {
		t.Fatalf("the list took %v; the test needs a page body longer than RequestTimeout (%v): lower the rate", took, opts.RequestTimeout)
	}
	if got := e.head(); got != objects {
		t.Fatalf("journal head after the initial list = %d; want %d", got, objects)
	}
	e.checkIndex(e.j)

	// A relist after a 410 that must read every object in full again.
	e.proxy.Cut()
	for i := range objects {
		e.update(largeName(i))
	}
	e.compact()
	e.proxy.Heal()
	start = time.Now()
	st := e.waitStatus("relist through a slow link", func(s reconcile.Status) bool {
		return s.Gone >= 1 && watching(2)(s)
	})
	t.Logf("relist of %d changed objects: %v (ListRestarts %d)", objects, time.Since(start), st.ListRestarts)
	got, _ := e.eventsFrom(objects + 1)
	if len(got) != objects {
		t.Fatalf("events of the relist = %d %q; want %d MODIFIED", len(got), got, objects)
	}
	for _, g := range got {
		if g[:9] != "MODIFIED " {
			t.Fatalf("event of the relist %q; want MODIFIED", g)
		}
	}
	e.checkIndex(e.j)
}

// breakBodies cuts the body of every list response of more than maxLimit
// objects after its first 300 bytes, as a link that cannot carry a large
// page would, and records the limit of each list request.
type breakBodies struct {
	maxLimit int64
	mu       sync.Mutex
	cut, ok  []int64
}

func (b *breakBodies) wrap(rt http.RoundTripper) http.RoundTripper {
	return roundTripFunc(func(req *http.Request) (*http.Response, error) {
		resp, err := rt.RoundTrip(req)
		q := req.URL.Query()
		if err != nil || q.Get("watch") == "true" || q.Get("limit") == "" || resp.StatusCode != http.StatusOK {
			return resp, err
		}
		limit, _ := strconv.ParseInt(q.Get("limit"), 10, 64)
		b.mu.Lock()
		defer b.mu.Unlock()
		if limit <= b.maxLimit {
			b.ok = append(b.ok, limit)
			return resp, nil
		}
		b.cut = append(b.cut, limit)
		resp.Body = &brokenBody{r: io.LimitReader(resp.Body, 300), c: resp.Body}
		return resp, nil
	})
}

func (b *breakBodies) take() (cut, ok []int64) {
	b.mu.Lock()
	defer b.mu.Unlock()
	cut, ok, b.cut, b.ok = b.cut, b.ok, nil, nil
	return cut, ok
}

// brokenBody passes what r holds, then fails as a reset connection.
type brokenBody struct {
	r io.Reader
	c io.Closer
}

func (b *brokenBody) Read(p []byte) (int, error) {
	n, err := b.r.Read(p)
	if err == io.EOF {
		err = fmt.Errorf("injected mid-body: %w", syscall.ECONNRESET)
	}
	return n, err
}

func (b *brokenBody) Close() error { return b.c.Close() }

// A list whose pages keep breaking mid-body makes its pages
// smaller until they pass, and completes without starting over: each page
// size is tried twice (16, 16, 8, 8), then pages of 4 pass; the next list
// (a relist after a 410) starts at 4.
func TestLoop_PagesBreakMidBody_PagesShrinkAndListCompletes(t *testing.T) {
	e := newEnv(t)
	for i := range 12 {
		e.create(fmt.Sprintf("cm-%02d", i))
	}
	b := &breakBodies{maxLimit: 4}
	cfg := e.wrapped(b.wrap)
	opts := pagedOptions(t)
	opts.PageSize = 16
	e.start(cfg, opts)
	st := e.waitStatus("initial list", watching(1))
	cut, ok := b.take()
	if fmt.Sprint(cut) != "[16 16 8 8]" {
		t.Errorf("limits of the pages cut mid-body = %v; want [16 16 8 8]", cut)
	}
	for _, l := range ok {
		if l != 4 {
			t.Errorf("limits of the pages read = %v; want 4 each", ok)
			break
		}
	}
	if st.ListRestarts != 0 || st.Lists != 1 {
		t.Errorf("Status: %d lists, %d restarts; want 1 list that never started over", st.Lists, st.ListRestarts)
	}
	if got := e.head(); got != 12 {
		t.Fatalf("journal head after the initial list = %d; want 12", got)
	}
	e.checkIndex(e.j)

	e.proxy.Cut()
	e.update("cm-03")
	e.delete("cm-07")
	e.compact()
	e.proxy.Heal()
	e.waitStatus("relist", watching(2))
	cut, ok = b.take()
	if len(cut) != 0 || len(ok) == 0 {
		t.Errorf("relist: pages cut %v, read %v; want none cut (pages of 4 from the start)", cut, ok)
	}
	e.expectEvents("events of the relist", 13, []string{"MODIFIED cm-03 relist", "DELETED cm-07 relist"})
	e.checkIndex(e.j)
}
