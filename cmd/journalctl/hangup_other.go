//go:build !unix

package main

import (
	"context"
	"io"
	"time"
)

// stopOnHangup returns a cancelable ctx: without poll(2) a follower ends
// on its first failed write.
func stopOnHangup(ctx context.Context, _ io.Writer, _ time.Duration) (context.Context, context.CancelFunc) {
	return context.WithCancel(ctx)
}

// outputGone reports false: without poll(2) a reader that went away is not
// told apart from other write errors.
func outputGone(io.Writer) bool { return false }
