package main

import (
	"context"
	"io"
	"time"

	"github.com/spf13/cobra"
)

// readPage is how many events one read asks for.
const readPage = 1000

type eventsFlags struct {
	db, output string
	from       uint64
	follow     bool
}

func newEventsCmd() *cobra.Command {
	var f eventsFlags
	cmd := &cobra.Command{
		Use:   "events --db FILE [--from OFFSET] [-f] [-o table|json]",
		Short: "Print the journal's events from an offset, and follow new ones with -f",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runEvents(cmd.Context(), cmd.OutOrStdout(), f)
		},
	}
	addDBFlag(cmd, &f.db)
	addOutputFlag(cmd, &f.output)
	cmd.Flags().Uint64Var(&f.from, "from", 0, "first `OFFSET` to print; 0 means the first retained")
	cmd.Flags().BoolVarP(&f.follow, "follow", "f", false, "keep printing new events until interrupted")
	return cmd
}

// runEvents prints events from f.from on; with f.follow it then waits for
// new ones until ctx is done, and returns nil.
func runEvents(ctx context.Context, out io.Writer, f eventsFlags) error {
	p, err := newPrinter(out, f.output, "OFFSET", "TIME", "TYPE", "ORIGIN", "KEY", "UID", "RESOURCEVERSION")
	if err != nil {
		return err
	}
	src, err := openSource(ctx, f.db)
	if err != nil {
		return err
	}
	// With --from 0 a follower that finds nothing retained waits from the
	// head read before its first read: an event appended in between is
	// then read, not skipped.
	next, floor := f.from, uint64(0)
	if f.follow && next == 0 {
		if floor, err = src.Head(ctx); err != nil {
			return err
		}
	}
	for {
		err := printFrom(ctx, src, p, &next)
		if err == nil && !f.follow {
			return nil
		}
		if err == nil {
			if next == 0 {
				next = floor + 1
			}
			_, err = src.Wait(ctx, next-1)
		}
		if f.follow && handover(err) {
			src, err = reopenSource(ctx, f.db)
		}
		if f.follow && ctx.Err() != nil {
			return nil
		}
		if err != nil {
			return err
		}
	}
}

// printFrom prints the events from offset *next to the head, page by page,
// and moves *next past them.
func printFrom(ctx context.Context, src source, p *printer, next *uint64) error {
	for {
		evs, err := src.Read(ctx, *next, readPage)
		for _, e := range evs {
			if err == nil {
				err = p.row(toJSONEvent(e), e.Offset, tableTime(e.Time), e.Type, e.Origin, e.Key, e.UID, e.ResourceVersion)
			}
		}
		if len(evs) > 0 {
			*next = evs[len(evs)-1].Offset + 1
		}
		if err != nil || len(evs) < readPage {
			if ferr := p.flush(); err == nil {
				err = ferr
			}
			return err
		}
	}
}

// reopenSource looks for the file's reader again, every pollInterval while
// the file is changing hands, until ctx is done.
func reopenSource(ctx context.Context, path string) (source, error) {
	for {
		src, err := openSource(ctx, path)
		if err == nil || !handover(err) {
			return src, err
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(pollInterval):
		}
	}
}
