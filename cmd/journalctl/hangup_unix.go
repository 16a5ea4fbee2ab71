//go:build unix

package main

// Following stops when the reader of its output goes away, as tail -f
// does: events -f | head -1 exits once head has. A quiet journal writes
// nothing, so no write would ever fail: the output's file descriptor is
// polled for POLLERR and POLLHUP instead (Linux and the BSDs report one
// of them on a pipe whose read end is closed, and on a hung-up terminal).

import (
	"context"
	"io"
	"os"
	"time"

	"golang.org/x/sys/unix"
	"k8s.io/apimachinery/pkg/util/wait"
)

// stopOnHangup returns a context that is done when ctx is, or when out is
// a file whose reader has gone away, checked every poll. Call stop to
// release it.
func stopOnHangup(ctx context.Context, out io.Writer, poll time.Duration) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithCancel(ctx)
	f, ok := out.(*os.File)
	if !ok {
		return ctx, cancel
	}
	fd := int(f.Fd())
	go func() { // ends with ctx
		if wait.PollUntilContextCancel(ctx, poll, false, func(context.Context) (bool, error) { return hungUp(fd), nil }) == nil {
			cancel()
		}
	}()
	return ctx, cancel
}

// hungUp reports whether the reader of file descriptor fd has gone away.
func hungUp(fd int) bool {
	fds := []unix.PollFd{{Fd: int32(fd), Events: 0}}
	n, err := unix.Poll(fds, 0)
	return err == nil && n > 0 && fds[0].Revents&(unix.POLLERR|unix.POLLHUP|unix.POLLNVAL) != 0
}

// outputGone reports whether out is a file whose reader has gone away (a
// pipe whose read end is closed: events | head).
func outputGone(out io.Writer) bool {
	f, ok := out.(*os.File)
	return ok && hungUp(int(f.Fd()))
}
