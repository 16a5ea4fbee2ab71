package reconcile

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"testing"
	"testing/iotest"
	"time"
)

func listBody(kind string, n int, itemsFirst bool) string {
	var items []string
	for i := range n {
		items = append(items, fmt.Sprintf(`{"metadata":{"name":"cm%d","namespace":"ns","uid":"u%d","resourceVersion":"%d","managedFields":[{"manager":"m"}]},"data":{"k":"%s"}}`,
			i, i, 100+i, strings.Repeat("x", 100)))
	}
	head := fmt.Sprintf(`"kind":%q,"apiVersion":"v1","metadata":{"resourceVersion":"123","continue":"tok"}`, kind)
	arr := `"items":[` + strings.Join(items, ",") + `]`
	if itemsFirst {
		return "{" + arr + "," + head + "}"
	}
	return "{" + head + "," + arr + "}"
}

// A page decodes the same from a stream that hands over one byte at a
// time, whatever the order of its fields, with or without objects.
func TestDecodePage(t *testing.T) {
	c := &client{}
	for _, tc := range []struct {
		name       string
		kind       string
		meta       bool
		itemsFirst bool
	}{
		{"full", "ConfigMapList", false, false},
		{"full, items before kind", "ConfigMapList", false, true},
		{"metadata", "PartialObjectMetadataList", true, false},
		{"metadata, items first", "PartialObjectMetadataList", true, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			const n = 700 // more than the read buffer
			body := listBody(tc.kind, n, tc.itemsFirst)
			var items []Item
			p, kind, err := c.decodePage(iotest.OneByteReader(strings.NewReader(body)), tc.meta, func(it Item) error { items = append(items, it); return nil })
			if err != nil {
				t.Fatal(err)
			}
			p.Items = items
			if kind != tc.kind || p.ResourceVersion != "123" || p.Continue != "tok" || len(p.Items) != n {
				t.Fatalf("page = kind %q rv %q continue %q, %d items; want %q 123 tok %d", kind, p.ResourceVersion, p.Continue, len(p.Items), tc.kind, n)
			}
			for i, it := range p.Items {
				if it.Key != fmt.Sprintf("ns/cm%d", i) || it.UID != fmt.Sprintf("u%d", i) || it.ResourceVersion != fmt.Sprint(100+i) {
					t.Fatalf("item %d = %+v", i, it)
				}
				if tc.meta != (it.Object == nil) {
					t.Fatalf("item %d: object %q with meta=%v", i, it.Object, tc.meta)
				}
				if !tc.meta && !strings.HasPrefix(string(it.Object), `{"kind":"ConfigMap","apiVersion":"v1","metadata":{"name":"cm`) {
					t.Fatalf("item %d: object %.80s; want kind and apiVersion put back", i, it.Object)
				}
			}
		})
	}
}

// Broken pages are errors, never a short page.
func TestDecodePage_Errors(t *testing.T) {
	c := &client{}
	whole := listBody("ConfigMapList", 3, false)
	for name, body := range map[string]string{
		"truncated":      whole[:len(whole)/2],
		"no uid":         `{"kind":"ConfigMapList","items":[{"metadata":{"name":"a","resourceVersion":"1"}}]}`,
		"not an object":  `[1,2]`,
		"status":         `{"kind":"Status","apiVersion":"v1","status":"Failure","code":500}`,
		"garbage inside": `{"kind":"ConfigMapList","items":[{"metadata":{"name":"a","uid":"u","resourceVersion":"1"}},x]}`,
	} {
		for _, meta := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/meta=%v", name, meta), func(t *testing.T) {
				n := 0
				_, _, err := c.decodePage(io.MultiReader(strings.NewReader(body)), meta, func(Item) error { n++; return nil })
				if err == nil {
					t.Fatalf("decodePage(%.60q) = %d items, nil error; want an error", body, n)
				}
			})
		}
	}
}

// An error of the callback ends the read and comes back unwrapped.
func TestDecodePage_StopsAtCallbackError(t *testing.T) {
	c := &client{}
	stop := errSnapshotGone
	n := 0
	_, _, err := c.decodePage(strings.NewReader(listBody("ConfigMapList", 10, false)), false, func(Item) error {
		if n++; n == 3 {
			return stop
		}
		return nil
	})
	if err != stop || n != 3 {
		t.Fatalf("decodePage = %v after %d items; want errSnapshotGone, unwrapped, after 3", err, n)
	}
}

// A watch stream reads frames one by one: io.EOF at an end between frames,
// io.ErrUnexpectedEOF inside one, ErrFrameTooLarge past the bound, and the
// connection's error as it is.
func TestStream_Next(t *testing.T) {
	frame := `{"type":"ADDED","object":{"metadata":{"name":"a"}}}` + "\n"
	reset := errors.New("connection reset")
	for _, tc := range []struct {
		name   string
		body   io.Reader
		max    int64
		frames int
		err    error
	}{
		{"two frames then EOF", strings.NewReader(frame + frame), 1 << 20, 2, io.EOF},
		{"one byte at a time", iotest.OneByteReader(strings.NewReader(frame + frame)), 1 << 20, 2, io.EOF},
		{"cut inside a frame", strings.NewReader(frame + frame[:20]), 1 << 20, 1, io.ErrUnexpectedEOF},
		{"frames at the bound pass", strings.NewReader(frame + frame), int64(len(frame)), 2, io.EOF},
		{"a frame past the bound", strings.NewReader(frame + `{"type":"ADDED","object":{"data":"` + strings.Repeat("x", 200) + `"}}`), int64(len(frame)) + 100, 1, ErrFrameTooLarge},
		{"reset", io.MultiReader(strings.NewReader(frame+frame[:10]), iotest.ErrReader(reset)), 1 << 20, 1, reset},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := newStreamSize(io.NopCloser(tc.body), func() {}, tc.max, 16)
			readFrames(t, s, tc.frames, tc.err, func(n int, ev watchEvent) {
				if ev.Type != "ADDED" || string(ev.Object) != `{"metadata":{"name":"a"}}` {
					t.Fatalf("frame %d = %q %s", n, ev.Type, ev.Object)
				}
			})
		})
	}
}

// readFrames reads s until it fails, passing each frame to check with its
// index, and fails the test unless the error matches wantErr after
// wantFrames frames.
func readFrames(t *testing.T, s *stream, wantFrames int, wantErr error, check func(n int, ev watchEvent)) {
	t.Helper()
	for n := 0; ; n++ {
		ev, err := s.next()
		if err != nil {
			if n != wantFrames || !errors.Is(err, wantErr) {
				t.Fatalf("next = %v after %d frames; want %v after %d", err, n, wantErr, wantFrames)
			}
			return
		}
		check(n, ev)
	}
}

// A list body that passes no byte for the progress timeout fails as a
// broken body wrapping ErrNoProgress; one that keeps passing bytes does
// not, however long it takes in total.
func TestProgressReader(t *testing.T) {
	slow := func(gap time.Duration, n int) io.ReadCloser {
		r, w := io.Pipe()
		go func() {
			for range n {
				time.Sleep(gap)
				if _, err := w.Write([]byte("x")); err != nil {
					return
				}
			}
			w.Close()
		}()
		return r
	}
	for _, tc := range []struct {
		name         string
		gap, timeout time.Duration
		n            int
		stalled      bool
	}{
		{"steady bytes, 30 gaps of a 20th of the timeout: longer than it in total", 50 * time.Millisecond, time.Second, 30, false},
		{"a gap of 10 times the timeout", 2 * time.Second, 200 * time.Millisecond, 2, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithCancelCause(context.Background())
			defer cancel(nil)
			body := slow(tc.gap, tc.n)
			context.AfterFunc(ctx, func() { body.Close() }) // as net/http ends a body
			pr := newProgressReader(ctx, cancel, body, tc.timeout)
			defer pr.Close()
			_, err := io.ReadAll(pr)
			if err == nil {
				err = io.EOF
			}
			got := pr.classify(err, 7)
			var be *bodyError
			if tc.stalled != (errors.As(got, &be) && errors.Is(got, ErrNoProgress)) {
				t.Fatalf("classify(%v) = %v; want a bodyError with ErrNoProgress: %v", err, got, tc.stalled)
			}
		})
	}
}
