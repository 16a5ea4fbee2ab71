package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/spf13/cobra"

	"github.com/watchjournal/watchjournal/journal"
)

// readPage is how many events one read asks for.
const readPage = 1000

// commitTimeout bounds one --commit, the search for the file's new reader
// included when the file changes hands.
const commitTimeout = 10 * time.Second

// followWidths are the minimum widths of events -f's table columns, so
// that later pages line up with the first: OFFSET, TIME (RFC 3339 with
// milliseconds), TYPE (MODIFIED), ORIGIN (restart), KEY and UID (a UUID).
// A column still widens, for good, for a wider cell.
var followWidths = []int{6, 24, 8, 7, 20, 36}

type eventsFlags struct {
	db, output, consumer string
	from                 uint64
	follow, commit       bool
}

func newEventsCmd() *cobra.Command {
	var f eventsFlags
	cmd := &cobra.Command{
		Use:   "events --db FILE [--from OFFSET | --consumer NAME [--commit]] [-f] [-o table|json]",
		Short: "Print the journal's events from an offset, and follow new ones with -f",
		Long: "Print the journal's events from --from, or from consumer NAME's position (the offset\n" +
			"after its committed one), and follow new ones with -f. A position that retention has\n" +
			"already dropped is an error, never a silent skip. With --commit the consumer's committed\n" +
			"offset moves to the last event printed, after each page printed: the file is opened\n" +
			"writable for the commit alone, or a running watch commits it. Only rows that reached\n" +
			"the output whole count: when a write fails, the commit stops at the row before it.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if f.commit && f.consumer == "" {
				return errors.New("--commit needs --consumer")
			}
			return runEvents(cmd.Context(), cmd.OutOrStdout(), f)
		},
	}
	addDBFlag(cmd, &f.db)
	addOutputFlag(cmd, &f.output)
	fl := cmd.Flags()
	fl.Uint64Var(&f.from, "from", 0, "first `OFFSET` to print; 0 means the first retained")
	fl.BoolVarP(&f.follow, "follow", "f", false, "keep printing new events until interrupted")
	fl.StringVar(&f.consumer, "consumer", "", "print from consumer `NAME`'s committed offset + 1")
	fl.BoolVar(&f.commit, "commit", false, "commit the last printed offset for --consumer")
	cmd.MarkFlagsMutuallyExclusive("from", "consumer")
	return cmd
}

// runEvents prints events from f.from, or from consumer f.consumer's
// position, on; with f.follow it then waits for new ones until ctx is done,
// and returns nil. With f.commit it commits each page printed.
func runEvents(ctx context.Context, out io.Writer, f eventsFlags) error {
	var widths []int
	if f.follow {
		widths = followWidths
	}
	// What --commit commits is what reached out whole: shown counts the
	// rows out accepted, whatever the printer buffers.
	shown := &shownRows{w: out}
	if f.output == "table" {
		shown.lines = -1 // the header
	}
	p, err := newPrinterWidths(shown, f.output, widths, "OFFSET", "TIME", "TYPE", "ORIGIN", "KEY", "UID", "RESOURCEVERSION")
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
	if f.consumer != "" {
		if next, err = consumerPosition(ctx, src, f.consumer); err != nil {
			return err
		}
	} else if f.follow && next == 0 {
		if floor, err = src.Head(ctx); err != nil {
			return err
		}
	}
	committed := next - 1 // with --consumer
	for {
		err := printFrom(ctx, src, p, shown, &next)
		if last := shown.last(); f.commit && last > committed {
			// Commit the rows that reached the output, even when the
			// read or a later write then failed or ctx is done; never
			// one that did not.
			var cerr error
			if src, cerr = commitPrinted(ctx, src, f, last); cerr != nil {
				return errors.Join(err, cerr)
			}
			committed = last
		}
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

// consumerPosition returns the offset after consumer name's committed one,
// and journal.ErrNoConsumer when there is no such consumer: only a writer
// registers consumers.
func consumerPosition(ctx context.Context, src source, name string) (uint64, error) {
	cs, err := src.Consumers(ctx)
	if err != nil {
		return 0, err
	}
	c, ok := findConsumer(cs, name)
	if !ok {
		return 0, fmt.Errorf("%w: %q (consumers register through the library's Journal.Consumer)", journal.ErrNoConsumer, name)
	}
	return c.Committed + 1, nil
}

// commitPrinted commits off for f.consumer through src. When the file
// changed hands meanwhile (a watch started or stopped) it looks for the
// file's reader again and commits there; it returns the source it used. It
// does not end with ctx, so that an interrupt still commits what was
// printed.
func commitPrinted(ctx context.Context, src source, f eventsFlags, off uint64) (source, error) {
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), commitTimeout)
	defer cancel()
	err := src.Commit(cctx, f.consumer, off)
	if handover(err) {
		if src, err = reopenSource(cctx, f.db); err == nil {
			err = src.Commit(cctx, f.consumer, off)
		}
	}
	if err != nil {
		return src, fmt.Errorf("commit offset %d for consumer %q: %w", off, f.consumer, err)
	}
	return src, nil
}

// printFrom prints the events from offset *next to the head, page by page,
// and moves *next past them. It tells shown the offset of each row it
// gives p, in order.
func printFrom(ctx context.Context, src source, p *printer, shown *shownRows, next *uint64) error {
	for {
		evs, err := src.Read(ctx, *next, readPage)
		for _, e := range evs {
			if err == nil {
				shown.printing(e.Offset)
				err = p.row(toJSONEvent(e), e.Offset, tableTime(e.Time), e.Type, e.Origin, e.Key, e.UID, e.ResourceVersion)
			}
		}
		if len(evs) > 0 {
			*next = evs[len(evs)-1].Offset + 1
		}
		if err != nil || len(evs) == 0 {
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

// shownRows is the writer the events printer writes through: it counts the
// rows that reached the output whole, so that --commit commits exactly
// those. Each row, a table's or a JSON line, ends in the one newline that
// counts it (a key, UID or resourceVersion holds none, and JSON escapes
// it); a row cut short by a failed write is not counted.
type shownRows struct {
	w     io.Writer
	lines int      // newlines written and not yet matched to offsets; -1 while a table header is due
	queue []uint64 // offsets of rows given to the printer and not yet known written, in order
	done  uint64   // the last offset whose row reached w whole; 0 for none
}

func (s *shownRows) Write(p []byte) (int, error) {
	n, err := s.w.Write(p)
	s.lines += bytes.Count(p[:n], []byte{'\n'})
	return n, err
}

// printing records that the row of offset off goes to the printer next.
func (s *shownRows) printing(off uint64) { s.queue = append(s.queue, off) }

// last returns the last offset whose row reached the output whole.
func (s *shownRows) last() uint64 {
	if k := min(max(s.lines, 0), len(s.queue)); k > 0 {
		s.done = s.queue[k-1]
		s.queue = s.queue[k:]
		s.lines -= k
	}
	return s.done
}
