package reconcile

// Bounds on what travels from the apiserver: the time to first byte
// (Options.RequestTimeout), a gap in a list page's body
// (Options.ProgressTimeout), the size of one watch frame (maxFrameBytes,
// 16 MiB, client-go's own bound: ErrFrameTooLarge). No request is bounded
// as a whole: a whole-page timeout would cut a page of large objects on a
// slow link every time and restart the list from page one, forever, so
// such a page takes as long as its bytes take. A page whose body breaks is
// requested again from the same continue token, and one that keeps
// breaking halves the page size (pageBroke, pages.go). A streaming list's
// initial events are bounded the same way: a gap of ProgressTimeout or a
// cut abandons it, nothing of it committed, and it starts again after the
// backoff; once its bookmark came, its connection is the watch, bounded by
// IdleTimeout.

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"k8s.io/client-go/rest"
)

// Errors of a transfer. They reach callers wrapped in ErrList or ErrWatch,
// through Status.LastError.
var (
	// ErrNoResponse is returned when a list or watch request got no
	// response (status and headers) within Options.RequestTimeout.
	ErrNoResponse = errors.New("reconcile: no response within RequestTimeout")
	// ErrNoProgress is returned when a list response's body passed no byte
	// for Options.ProgressTimeout.
	ErrNoProgress = errors.New("reconcile: no bytes received within ProgressTimeout")
	// ErrFrameTooLarge is returned when a watch frame is larger than
	// maxFrameBytes (16 MiB). Nothing of the frame is journaled; the loop
	// backs off and watches again from the last resourceVersion it applied.
	ErrFrameTooLarge = errors.New("reconcile: watch frame too large")
)

// maxFrameBytes bounds one watch frame, in bytes: the limit client-go's
// streaming decoder (k8s.io/apimachinery runtime/serializer/streaming,
// maxBytes) puts on a frame, so a frame any client-go watch accepts is
// accepted here. An object stored in etcd is at most 1.5 MiB by default
// (--max-request-bytes) and a request body to the apiserver at most 3 MiB;
// as JSON an object can grow past its stored size (protobuf in etcd,
// base64 binaryData, managedFields), and 16 MiB leaves a margin of 5× over
// the largest request. The bound holds to within the 32 KiB read buffer
// (pageBuffer): bytes read ahead of a frame count toward the one before.
const maxFrameBytes = 16 << 20

// timeouts of one list request.
type timeouts struct {
	// response bounds the wait for the status and headers.
	response time.Duration
	// progress bounds a gap in the body, between two reads that return
	// bytes.
	progress time.Duration
}

// openBody sends r and returns its body once the response began: it fails
// with ErrNoResponse when no response came within timeout. cancel is the
// request context's; openBody cancels it on timeout.
func openBody(ctx context.Context, cancel context.CancelCauseFunc, r *rest.Request, timeout time.Duration) (io.ReadCloser, error) {
	noResponse := fmt.Errorf("%w (%v)", ErrNoResponse, timeout)
	timer := time.AfterFunc(timeout, func() { cancel(noResponse) })
	body, err := r.Stream(ctx)
	if !timer.Stop() {
		if err == nil {
			_ = body.Close()
		}
		return nil, noResponse
	}
	return body, err
}

// progressReader reads a response body and cancels its request when one
// read waits for timeout without a byte. Only time spent waiting in Read
// counts: a consumer that is slow between reads (staging, a full disk's
// retry) is not a stalled link. It records the first error of the body.
type progressReader struct {
	ctx     context.Context
	body    io.ReadCloser
	timeout time.Duration
	timer   *time.Timer
	// n is the count of bytes read; err the first error of the body.
	n   int64
	err error
}

func newProgressReader(ctx context.Context, cancel context.CancelCauseFunc, body io.ReadCloser, timeout time.Duration) *progressReader {
	stalled := fmt.Errorf("%w (%v)", ErrNoProgress, timeout)
	timer := time.AfterFunc(time.Hour, func() { cancel(stalled) })
	timer.Stop() // each Read arms it, unless timeout is 0
	return &progressReader{ctx: ctx, body: body, timeout: timeout, timer: timer}
}

// Read reads the body; the progress timer runs while it waits, unless
// the timeout is 0 (off: a streaming list's connection once it carries
// the watch, which may be quiet for long).
func (p *progressReader) Read(b []byte) (int, error) {
	if p.timeout > 0 {
		p.timer.Reset(p.timeout)
	}
	n, err := p.body.Read(b)
	p.timer.Stop()
	p.n += int64(n)
	if err != nil {
		if cause := context.Cause(p.ctx); errors.Is(cause, ErrNoProgress) {
			err = cause
		}
		if p.err == nil {
			p.err = err
		}
	}
	return n, err
}

// Close stops the timer and closes the body.
func (p *progressReader) Close() error {
	p.timer.Stop()
	return p.body.Close()
}

// classify returns the error of a page of limit objects whose decoding
// failed with err: a *bodyError when the body broke (the page may be too
// large for the link), err itself when the bytes that came were wrong or
// the caller's context ended.
func (p *progressReader) classify(err error, limit int64) error {
	switch {
	case p.err == nil:
		return err
	case p.ctx.Err() != nil && !errors.Is(context.Cause(p.ctx), ErrNoProgress):
		return err // the caller's context ended
	case p.err == io.EOF:
		return &bodyError{limit: limit, read: p.n, err: io.ErrUnexpectedEOF}
	}
	return &bodyError{limit: limit, read: p.n, err: p.err}
}

// bodyError is returned by a list page whose response began and whose body
// broke before its end: no byte for ProgressTimeout (ErrNoProgress), a cut
// connection, or an early end (io.ErrUnexpectedEOF).
type bodyError struct {
	limit, read int64
	err         error
}

// Error says how far the page came.
func (e *bodyError) Error() string {
	return fmt.Sprintf("reconcile: list page of up to %d objects broke after %d bytes: %v", e.limit, e.read, e.err)
}

// Unwrap returns the body's error.
func (e *bodyError) Unwrap() error { return e.err }

// frameReader reads a watch body and fails a frame that passes max bytes
// with ErrFrameTooLarge; next resets n at each frame. It records the first
// error of the body.
type frameReader struct {
	r      io.Reader
	n, max int64
	err    error
	// total counts every byte read, across frames.
	total int64
}

// Read reads at most what is left of the frame's bound.
func (f *frameReader) Read(b []byte) (int, error) {
	if f.n >= f.max {
		err := fmt.Errorf("%w: more than %d bytes", ErrFrameTooLarge, f.max)
		if f.err == nil {
			f.err = err
		}
		return 0, err
	}
	if left := f.max - f.n; int64(len(b)) > left {
		b = b[:left]
	}
	n, err := f.r.Read(b)
	f.n += int64(n)
	f.total += int64(n)
	if err != nil && f.err == nil {
		f.err = err
	}
	return n, err
}
