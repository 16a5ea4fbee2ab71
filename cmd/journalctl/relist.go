package main

import (
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/spf13/cobra"

	"github.com/watchjournal/watchjournal/journal"
	"github.com/watchjournal/watchjournal/journal/inspect"
	"github.com/watchjournal/watchjournal/reconcile"
)

// errNoWatch is returned by relist when no watch serves the file's socket:
// exit status 2.
var errNoWatch = errors.New("no watch is running")

func newRelistCmd(conf *settings) *cobra.Command {
	var db string
	cmd := &cobra.Command{
		Use:   "relist --db FILE",
		Short: "Ask the running watch to relist now and journal what its watch lost (anti-entropy)",
		Long: "Ask the watch that holds FILE, over its socket, to relist the resource and diff the list\n" +
			"against the index now (reconcile.Loop.Verify), as watch --verify-interval does\n" +
			"periodically; then wait for the relist to complete (at most 5 minutes) and print how\n" +
			"many divergences it repaired, and the events it journaled for them (origin relist). A\n" +
			"divergence is an event the watch had lost. Without a running watch it fails with exit\n" +
			"status 2; journalctl check checks a file offline instead.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runRelist(cmd.Context(), cmd.OutOrStdout(), cmd.ErrOrStderr(), db, conf)
		},
	}
	addDBFlag(cmd, &db)
	return cmd
}

// runRelist asks the watch of db for a verify, waits until the loop's
// verifies pass the count before the request, and prints the divergences
// since then and the relist events journaled after the head read before
// the request. It waits at most conf.relistTimeout. An interrupt while it
// waits returns nil: the watch still relists.
func runRelist(ctx context.Context, out, stderr io.Writer, db string, conf *settings) error {
	s := inspect.NewClient(inspect.SocketPath(db))
	before, err := s.Verify(ctx)
	if errors.Is(err, inspect.ErrNoServer) {
		return fmt.Errorf("%w on %s", errNoWatch, db)
	}
	var st inspect.Status
	if err == nil {
		pctx, stopProgress := context.WithCancel(ctx)
		progressed := make(chan struct{})
		go func() { defer close(progressed); relistProgress(pctx, s, stderr, conf) }() // ends with stopProgress
		st, err = s.WaitVerify(ctx, before.Verifies, conf.relistTimeout)
		stopProgress()
		<-progressed
	}
	switch {
	case err != nil && ctx.Err() != nil:
		// Interrupted while waiting, or while the request was on its
		// way: it may have reached the watch, which then relists anyway.
		fmt.Fprintln(stderr, "journalctl: relist: interrupted while waiting; the watch still relists")
		return nil
	case errors.Is(err, inspect.ErrNoServer):
		return fmt.Errorf("relist: the watch stopped before the relist completed: %w", err)
	case err != nil:
		return fmt.Errorf("relist: %w", err)
	case reconcile.Phase(st.Phase) == reconcile.PhaseStopped && st.Verifies <= before.Verifies:
		return errors.New("relist: the watch stopped before the relist completed")
	}
	n := st.Divergences - before.Divergences
	evs, err := relistEvents(ctx, s, before.Head, n)
	if err != nil {
		return fmt.Errorf("relist: read the events it journaled: %w", err)
	}
	fmt.Fprintf(out, "relist: %d divergences repaired\n", n)
	if len(evs) == 0 {
		return nil
	}
	p := newSpecPrinter(out, printSpec{format: "table", header: []string{"OFFSET", "TIME", "TYPE", "ORIGIN", "KEY", "UID", "RESOURCEVERSION"}})
	for _, e := range evs {
		if err := p.row(nil, e.Offset, tableTime(e.Time), e.Type, e.Origin, e.Key, e.UID, e.ResourceVersion); err != nil {
			return err
		}
	}
	return p.flush()
}

// relistEvents returns the last n events with origin relist after offset
// head, up to the head now: those a verify journaled. Watch events
// journaled meanwhile are left out. Events that retention has already
// dropped are skipped.
func relistEvents(ctx context.Context, s *inspect.Client, head uint64, n int) ([]journal.Event, error) {
	if n <= 0 {
		return nil, nil
	}
	last, err := s.Head(ctx)
	if err != nil {
		return nil, err
	}
	var out []journal.Event
	for next := head + 1; next <= last; {
		evs, err := s.Read(ctx, next, readPage)
		var ce *journal.TrimmedError
		if errors.As(err, &ce) {
			next = ce.First
			continue
		}
		if err != nil {
			return nil, err
		}
		if len(evs) == 0 {
			break
		}
		for _, e := range evs {
			if e.Offset <= last && e.Origin == journal.OriginRelist {
				out = append(out, e)
			}
		}
		next = evs[len(evs)-1].Offset + 1
	}
	if len(out) > n {
		out = out[len(out)-n:]
	}
	return out, nil
}
