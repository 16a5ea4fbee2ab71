package main

// Progress of a long list while watch runs. A first list of thousands of
// objects at a small page size takes minutes; the loop counts pages and
// objects as they arrive (reconcile.Status.ListPages, ListObjects), and
// this shows them: on a terminal, one status line rewritten in place once
// a list has run for a second (pages, objects, rate, elapsed); otherwise
// a log line every progressEvery pages.

import (
	"context"
	"fmt"
	"io"
	"os"
	"time"

	"go.uber.org/zap"
	"golang.org/x/term"

	"github.com/watchjournal/watchjournal/reconcile"
)

// progressEvery is how many list pages pass between two progress log lines
// when stderr is not a terminal.
var progressEvery = 100

// progressDelay is how long a list runs before a terminal shows its
// progress; progressRedraw bounds how often the line is drawn again.
const (
	progressDelay  = time.Second
	progressRedraw = 200 * time.Millisecond
)

// isTerminal reports whether w is a terminal.
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	return ok && term.IsTerminal(int(f.Fd()))
}

// reportProgress shows the progress of loop's lists on stderr (a terminal)
// or in log lines, until ctx is done.
func reportProgress(ctx context.Context, loop *reconcile.Loop, stderr io.Writer, log *zap.Logger) {
	p := &listProgress{tty: isTerminal(stderr), w: stderr, log: log, every: progressEvery}
	var last reconcile.Status
	for {
		err := loop.WaitFor(ctx, func(st reconcile.Status) bool {
			return st.Phase != last.Phase || st.ListPages != last.ListPages
		})
		if err != nil {
			p.end()
			return
		}
		last = loop.Status()
		p.update(last, time.Now())
	}
}

// listProgress follows one list at a time.
type listProgress struct {
	tty   bool
	w     io.Writer
	log   *zap.Logger // nil: progress lines are written to w
	every int

	listing bool
	start   time.Time // the list's start
	pages   int       // pages at the last report
	drawn   time.Time // last draw on the terminal; zero: nothing drawn
}

func (p *listProgress) update(st reconcile.Status, now time.Time) {
	if st.Phase != reconcile.PhaseListing {
		if p.listing && !p.drawn.IsZero() {
			p.draw(st, now)
			p.end()
		}
		p.listing = false
		return
	}
	if !p.listing || st.ListPages < p.pages {
		// A new list, or one started again from its first page.
		p.listing, p.start, p.pages = true, now, 0
	}
	elapsed := now.Sub(p.start)
	switch {
	case p.tty:
		if elapsed >= progressDelay && now.Sub(p.drawn) >= progressRedraw {
			p.draw(st, now)
		}
	case st.ListPages >= p.pages+p.every && p.log == nil:
		p.pages = st.ListPages
		fmt.Fprintf(p.w, "journalctl: relist: listing: %d pages, %d objects, %s, %s\n", st.ListPages, st.ListObjects,
			rate(st.ListObjects, elapsed), elapsed.Round(time.Second))
	case st.ListPages >= p.pages+p.every:
		p.pages = st.ListPages
		p.log.Info("listing", zap.Int("pages", st.ListPages), zap.Int("objects", st.ListObjects),
			zap.String("rate", rate(st.ListObjects, elapsed)), zap.Duration("elapsed", elapsed.Round(time.Second)))
	}
}

// draw rewrites the terminal's status line.
func (p *listProgress) draw(st reconcile.Status, now time.Time) {
	elapsed := now.Sub(p.start)
	fmt.Fprintf(p.w, "\r\033[Klisting: %d pages, %d objects, %s, %s", st.ListPages, st.ListObjects,
		rate(st.ListObjects, elapsed), elapsed.Round(time.Second))
	p.drawn = now
}

// end ends the status line, if one is drawn.
func (p *listProgress) end() {
	if !p.drawn.IsZero() {
		fmt.Fprintln(p.w)
		p.drawn = time.Time{}
	}
}

// rate formats objects per second over elapsed.
func rate(objects int, elapsed time.Duration) string {
	if elapsed <= 0 {
		return "- objects/s"
	}
	return fmt.Sprintf("%.0f objects/s", float64(objects)/elapsed.Seconds())
}
