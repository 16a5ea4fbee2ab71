package main

// relist's progress: while it waits for the watch's verify, it reads the
// watch's status (GET /status) every settings.relistPoll and shows the
// list's pages and objects as watch does (progress.go): a status line on a
// terminal, a line every settings.progressEvery pages otherwise.

import (
	"context"
	"io"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/watchjournal/watchjournal/journal/inspect"
	"github.com/watchjournal/watchjournal/reconcile"
)

// relistProgress shows the progress of the watch's lists on stderr until
// ctx is done, reading the status every conf.relistPoll.
func relistProgress(ctx context.Context, s *inspect.Client, stderr io.Writer, conf *settings) {
	p := &listProgress{w: stderr, every: conf.progressEvery}
	if isTerminal(stderr) {
		p.status = &statusLine{w: stderr}
	}
	_ = wait.PollUntilContextCancel(ctx, conf.relistPoll, false, func(ctx context.Context) (bool, error) {
		if ws, err := s.Status(ctx); err == nil { // else the wait reports a watch that went away
			st := reconcile.Status{Phase: reconcile.Phase(ws.Phase)}
			st.ListPages, st.ListObjects = ws.ListPages, ws.ListObjects
			p.update(st, time.Now())
		}
		return false, nil // until ctx is done
	})
	p.end()
}
