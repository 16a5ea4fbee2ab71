package main

// Progress of a long list while watch runs. A first list of thousands of
// objects at a small page size takes minutes; the loop counts pages and
// objects as they arrive (reconcile.Status.ListPages, ListObjects), and
// this shows them: on a terminal, one status line rewritten in place once
// a list has run for a second (pages, objects, rate, elapsed), which log
// lines clear and draw again below them (statusLine); otherwise a log line
// every settings.progressEvery pages, and one with the final count when a
// list of that many pages or more ends past its last line.
//
// The counts are sampled (the loop's status when this goroutine runs, or
// relist's GET /status every second), not pushed page by page: under load
// a line may report page 11 rather than 10, and a list's last pages may
// arrive after its last sample. Hence the final line: a long list's progress
// always ends with its whole count, once the sampler sees the list over.

import (
	"context"
	"fmt"
	"io"
	"os"
	"sync"
	"time"

	"go.uber.org/zap"
	"golang.org/x/term"

	"github.com/watchjournal/watchjournal/reconcile"
)

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

// statusLine writes to a terminal with one status line at the bottom:
// every other write (a log line) clears the status line first and draws it
// again after itself, so that the two never mix on one line.
type statusLine struct {
	mu   sync.Mutex
	w    io.Writer
	line string // "" when none is drawn
}

// Write writes p above the status line.
func (s *statusLine) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.line == "" {
		return s.w.Write(p)
	}
	io.WriteString(s.w, "\r\033[K")
	n, err := s.w.Write(p)
	io.WriteString(s.w, s.line)
	return n, err
}

// set draws line as the status line.
func (s *statusLine) set(line string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.line = line
	io.WriteString(s.w, "\r\033[K"+line)
}

// end leaves the status line on the screen as an ordinary line.
func (s *statusLine) end() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.line != "" {
		io.WriteString(s.w, "\n")
		s.line = ""
	}
}

// reportProgress shows the progress of loop's lists on status (a terminal;
// nil: none) or in log lines, one every every pages, until ctx is done.
func reportProgress(ctx context.Context, loop *reconcile.Loop, status *statusLine, log *zap.Logger, every int) {
	p := &listProgress{status: status, log: log, every: every}
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

// listProgress follows one list at a time. With a status line (a
// terminal) it draws there; otherwise it logs, to log or, when log is nil,
// as lines on w.
type listProgress struct {
	status *statusLine
	w      io.Writer
	log    *zap.Logger
	every  int

	listing bool
	lists   int       // reconcile.Status.Lists at the last sample
	start   time.Time // the list's start
	pages   int       // pages at the last report
	drawn   time.Time // last draw on the terminal; zero: nothing drawn
}

func (p *listProgress) update(st reconcile.Status, now time.Time) {
	completed := st.Lists > p.lists // a list completed since the last sample
	p.lists = st.Lists
	if st.Phase != reconcile.PhaseListing {
		if !p.listing && completed {
			// A list that began and ended between two samples.
			p.start, p.pages = now, 0
		}
		switch {
		case p.listing && !p.drawn.IsZero():
			p.draw(st, now)
			p.end()
		case (p.listing || completed) && p.status == nil && st.ListPages > p.pages &&
			(p.pages > 0 || st.ListPages >= p.every):
			// A list of p.every pages or more ended past its last
			// line: its final count, which a sample taken after the
			// list's last page would otherwise never show.
			p.logLine(st, now.Sub(p.start))
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
	case p.status != nil:
		if elapsed >= progressDelay && now.Sub(p.drawn) >= progressRedraw {
			p.draw(st, now)
		}
	case st.ListPages >= p.pages+p.every:
		p.logLine(st, elapsed)
	}
}

// logLine logs st's list progress, elapsed into the list, as a line.
func (p *listProgress) logLine(st reconcile.Status, elapsed time.Duration) {
	p.pages = st.ListPages
	if p.log == nil {
		fmt.Fprintf(p.w, "journalctl: relist: listing: %d pages, %d objects, %s, %s\n", st.ListPages, st.ListObjects,
			rate(st.ListObjects, elapsed), elapsed.Round(time.Second))
		return
	}
	p.log.Info("listing", zap.Int("pages", st.ListPages), zap.Int("objects", st.ListObjects),
		zap.String("rate", rate(st.ListObjects, elapsed)), zap.Duration("elapsed", elapsed.Round(time.Second)))
}

// draw rewrites the terminal's status line.
func (p *listProgress) draw(st reconcile.Status, now time.Time) {
	elapsed := now.Sub(p.start)
	p.status.set(fmt.Sprintf("listing: %d pages, %d objects, %s, %s", st.ListPages, st.ListObjects,
		rate(st.ListObjects, elapsed), elapsed.Round(time.Second)))
	p.drawn = now
}

// end leaves the status line, if one is drawn, as an ordinary line.
func (p *listProgress) end() {
	if !p.drawn.IsZero() {
		p.status.end()
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
