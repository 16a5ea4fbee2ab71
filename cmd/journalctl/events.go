package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/watchjournal/watchjournal/journal"
	"github.com/watchjournal/watchjournal/journal/inspect"
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
	// lines > 0 prints the last lines events (that pass the filters).
	lines int
	// since and until bound the events' times (zero: no bound).
	since, until time.Time
	// key, namespace, typ, origin and reason keep the events that match
	// each set one; reason "none" matches events without a reason.
	key, namespace, typ, origin, reason string
	reverse, showManagedFields          bool
	// sealKeyFiles are --seal-key-file's files (seal.go).
	sealKeyFiles []string
	// conf are the invocation's settings (settings.go): polls and the
	// first source's opener.
	conf *settings
}

// typeValues and originValues are --type's and --origin's values.
var typeValues, originValues = []string{"ADDED", "MODIFIED", "DELETED"}, []string{"watch", "relist", "restart"}

// reasonValues are --reason's values: journal's Reasons, and none.
var reasonValues = []string{string(journal.ReasonGone), string(journal.ReasonLeftSelector), string(journal.ReasonMoved),
	string(journal.ReasonUnconfirmed), "none"}

// eventsFormats are events' -o formats.
var eventsFormats = []string{"table", "wide", "json", "yaml", "name"}

func newEventsCmd(conf *settings) *cobra.Command {
	f := eventsFlags{conf: conf}
	var since, until string
	cmd := &cobra.Command{
		Use:   "events --db FILE [--from OFFSET | --consumer NAME [--commit]] [-f] [-n N] [-r] [--since T] [--until T] [--key K] [--namespace NS] [--type T] [--origin O] [-o FORMAT]",
		Short: "Print the journal's events from an offset, and follow new ones with -f",
		Long: "Print the journal's events from --from, or from consumer NAME's position (the offset\n" +
			"after its committed one), and follow new ones with -f. A position that retention has\n" +
			"already trimmed is an error, never a silent skip. With --commit the consumer's committed\n" +
			"offset moves to the last event printed, after each page printed: the file is opened\n" +
			"writable for the commit alone, or a running watch commits it. Only rows that reached\n" +
			"the output whole count: when a write fails, the commit stops at the row before it.\n\n" +
			"As systemd's journalctl: -n N prints the last N events (then follows with -f), -r the\n" +
			"newest first, --since/--until bound the events' times (RFC 3339, or a duration ago:\n" +
			"10m, 2h, 1d). --key, --namespace, --type (ADDED, MODIFIED, DELETED), --origin (watch,\n" +
			"relist, restart) and --reason (gone, left-selector, moved, unconfirmed, none) keep the\n" +
			"events that match. As kubectl's: -o table, wide (adds the previous resourceVersion,\n" +
			"whether a list diff inferred the event, and the REASON: gone, left-selector, moved,\n" +
			"unconfirmed, - for none), json (one JSON array; with -f one event a line), yaml, name\n" +
			"(the keys). json and yaml leave out the objects' metadata.managedFields unless\n" +
			"--show-managed-fields.\n\n" +
			"-f stops when the reader of its output goes away (events -f | head -1).\n\n" +
			"Objects sealed by watch --seal-key-file (Secrets) are opened with --seal-key-file; without\n" +
			"the key that sealed them, reading them is an error that names the key's ID.",
		Args: noArgsDB,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := checkEventsFlags(cmd, &f, since, until); err != nil {
				return err
			}
			keys, err := loadKeyring(f.sealKeyFiles)
			if err != nil {
				return err
			}
			return runEvents(withKeyring(cmd.Context(), keys), cmd.OutOrStdout(), cmd.ErrOrStderr(), f)
		},
	}
	addDBFlag(cmd, &f.db)
	addSealKeyFlag(cmd, &f.sealKeyFiles, sealKeyFileUsage+"; opens the objects of a file whose objects are sealed (without it, reading one is an error naming its key)")
	fl := cmd.Flags()
	addOutputFlag(cmd, &f.output, eventsFormats)
	fl.Var(offsetValue{&f.from}, "from", "first `OFFSET` to print; 0 means the first retained")
	fl.BoolVarP(&f.follow, "follow", "f", false, "keep printing new events until interrupted")
	fl.StringVar(&f.consumer, "consumer", "", "print from consumer `NAME`'s committed offset + 1")
	fl.BoolVar(&f.commit, "commit", false, "commit the last printed offset for --consumer")
	fl.IntVarP(&f.lines, "lines", "n", 0, "print the last `N` events (0: all)")
	fl.BoolVarP(&f.reverse, "reverse", "r", false, "print the newest events first")
	fl.StringVar(&since, "since", "", "print events journaled at or after `TIME` (RFC 3339, or a duration ago: 10m, 1d)")
	fl.StringVar(&until, "until", "", "print events journaled at or before `TIME` (RFC 3339, or a duration ago)")
	fl.StringVar(&f.key, "key", "", "print the events of `KEY` (namespace/name) only")
	fl.StringVar(&f.namespace, "namespace", "", "print the events of namespace `NS` only")
	fl.StringVar(&f.typ, "type", "", "print events of `TYPE` only: ADDED, MODIFIED or DELETED")
	fl.StringVar(&f.origin, "origin", "", "print events of `ORIGIN` only: watch, relist or restart")
	fl.StringVar(&f.reason, "reason", "", "print events of `REASON` only: "+strings.Join(reasonValues, ", ")+" (none: without a reason)")
	fl.BoolVar(&f.showManagedFields, "show-managed-fields", false, "keep metadata.managedFields in -o json and yaml")
	return cmd
}

// checkEventsFlags checks f's flags against each other and parses since
// and until into it.
func checkEventsFlags(cmd *cobra.Command, f *eventsFlags, since, until string) error {
	fl := cmd.Flags()
	switch {
	case f.commit && f.consumer == "":
		return errors.New("--commit needs --consumer")
	case fl.Changed("from") && f.consumer != "":
		return errors.New("--from and --consumer exclude each other: --consumer NAME reads from NAME's committed offset + 1; give one of them")
	case f.reverse && f.follow:
		return errors.New("--reverse and --follow exclude each other: new events come last")
	case f.reverse && f.commit:
		return errors.New("--reverse and --commit exclude each other: commits move forward")
	case (f.lines > 0 || f.reverse) && f.consumer != "":
		return errors.New("-n and -r read back from the head: they exclude --consumer, which reads on from its position")
	case f.lines < 0:
		return fmt.Errorf("--lines %d: want 0 (all) or more", f.lines)
	}
	if err := checkFormat(f.output, eventsFormats...); err != nil {
		return err
	}
	if f.commit && f.output == "yaml" {
		return errors.New("--commit needs -o table, wide, json or name: it counts one event a line")
	}
	f.typ, f.origin, f.reason = strings.ToUpper(f.typ), strings.ToLower(f.origin), strings.ToLower(f.reason)
	switch {
	case f.typ != "" && !slices.Contains(typeValues, f.typ):
		return fmt.Errorf("--type %q: want %s", f.typ, orList(typeValues))
	case f.origin != "" && !slices.Contains(originValues, f.origin):
		return fmt.Errorf("--origin %q: want %s", f.origin, orList(originValues))
	case f.reason != "" && !slices.Contains(reasonValues, f.reason):
		return fmt.Errorf("--reason %q: want %s", f.reason, strings.Join(reasonValues, ", "))
	}
	now := time.Now()
	var err error
	if f.since, err = parseTimeFlag("since", since, now); err != nil {
		return err
	}
	if f.until, err = parseTimeFlag("until", until, now); err != nil {
		return err
	}
	return nil
}

// parseTimeFlag parses --name's value s: "" (no bound), an RFC 3339 time,
// or a duration ago from now (10m, 2h, 1d, 1d12h).
func parseTimeFlag(name, s string, now time.Time) (time.Time, error) {
	if s == "" {
		return time.Time{}, nil
	}
	if t, err := time.Parse(time.RFC3339Nano, s); err == nil {
		return t, nil
	}
	if d, err := parseDays(s); err == nil && d >= 0 {
		return now.Add(-d), nil
	}
	return time.Time{}, fmt.Errorf("--%s %q: want an RFC 3339 time (2026-07-01T12:00:00Z) or a duration ago (10m, 2h, 1d)", name, s)
}

// parseDays parses a Go duration that may start with whole days: "1d",
// "2d12h", "90m".
func parseDays(s string) (time.Duration, error) {
	var days time.Duration
	if i := strings.IndexByte(s, 'd'); i > 0 {
		n, err := strconv.ParseUint(s[:i], 10, 16)
		if err != nil {
			return 0, err
		}
		days, s = time.Duration(n)*24*time.Hour, s[i+1:]
		if s == "" {
			return days, nil
		}
	}
	d, err := time.ParseDuration(s)
	return days + d, err
}

// offsetValue is the --from flag: a whole number, with a message that says
// so for anything else.
type offsetValue struct{ v *uint64 }

func (o offsetValue) String() string {
	if o.v == nil {
		return "0"
	}
	return strconv.FormatUint(*o.v, 10)
}

func (o offsetValue) Set(s string) error {
	n, err := strconv.ParseUint(s, 10, 64)
	if err != nil {
		return errors.New("want an offset: a whole number, 1 or more (0 means the first retained event)")
	}
	*o.v = n
	return nil
}

func (offsetValue) Type() string { return "OFFSET" }

// noArgsDB refuses arguments, and suggests --db for one that names a file.
func noArgsDB(cmd *cobra.Command, args []string) error {
	if len(args) == 0 {
		return nil
	}
	if fi, err := os.Stat(args[0]); strings.HasSuffix(args[0], ".db") || err == nil && !fi.IsDir() {
		return fmt.Errorf("%s takes no arguments; for the journal file say --db %s", cmd.Name(), args[0])
	}
	return fmt.Errorf("%s takes no arguments, got %q; the journal file goes in --db FILE", cmd.Name(), args[0])
}

// keep reports whether e passes f's filter flags; past is true when e is
// after --until, as every later event is.
func (f *eventsFlags) keep(e journal.Event) (keep, past bool) {
	if !f.until.IsZero() && e.Time.After(f.until) {
		return false, true
	}
	switch {
	case !f.since.IsZero() && e.Time.Before(f.since),
		f.key != "" && e.Key != f.key,
		f.namespace != "" && !strings.HasPrefix(e.Key, f.namespace+"/"),
		f.typ != "" && string(e.Type) != f.typ,
		f.origin != "" && string(e.Origin) != f.origin,
		f.reason != "" && string(e.Reason) != strings.TrimPrefix(f.reason, "none"):
		return false, false
	}
	return true, false
}

// eventPrinter prints events as f asks: the filters, -o, managedFields.
type eventPrinter struct {
	p     *printer
	shown *shownRows
	f     *eventsFlags
	// past is set once an event after --until was read.
	past bool
}

// print prints e unless the filters drop it.
func (ep *eventPrinter) print(e journal.Event) error {
	keep, past := ep.f.keep(e)
	ep.past = ep.past || past
	if !keep {
		return nil
	}
	ep.shown.printing(e.Offset)
	je := inspect.NewEvent(e)
	if !ep.f.showManagedFields {
		je.Object = dropManagedFields(je.Object)
	}
	return ep.p.row(je, e.Offset, tableTime(e.Time), e.Type, e.Origin, e.Key, e.UID, e.ResourceVersion,
		orDash(e.PrevResourceVersion), e.Synthesized(), orDash(string(e.Reason)))
}

// runEvents prints events from f.from, or from consumer f.consumer's
// position, on; with f.follow it then waits for new ones until ctx is done,
// or out's reader goes away, and returns nil. With f.commit it commits each
// page printed. Notes go to errOut.
func runEvents(ctx context.Context, out, errOut io.Writer, f eventsFlags) error {
	if f.follow {
		var stop context.CancelFunc
		ctx, stop = stopOnHangup(ctx, out, f.conf.hangupPoll)
		defer stop()
	}
	spec := printSpec{
		format: f.output, stream: f.follow, narrow: 7, nameCol: 4,
		header: []string{"OFFSET", "TIME", "TYPE", "ORIGIN", "KEY", "UID", "RESOURCEVERSION", "PREVRESOURCEVERSION", "SYNTHESIZED", "REASON"},
	}
	if f.follow {
		spec.minWidths = followWidths
	}
	// What --commit commits is what reached out whole: shown counts the
	// rows out accepted, whatever the printer buffers.
	shown := &shownRows{w: out}
	if f.output == "table" || f.output == "wide" || (f.output == "json" && !f.follow) {
		shown.lines = -1 // the header, or the JSON array's "["
	}
	ep := &eventPrinter{p: newSpecPrinter(shown, spec), shown: shown, f: &f}
	src, err := f.conf.openEventsSource(ctx, f.db, f.conf.pollInterval)
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
	} else if next > 0 || f.follow || f.lines > 0 || f.reverse || !f.since.IsZero() {
		head, err := src.Head(ctx)
		if err != nil {
			return err
		}
		if next > head+1 {
			if !f.follow {
				return fmt.Errorf("offset %d is past the head: the last event has offset %d, the next will have %d", next, head, head+1)
			}
			fmt.Fprintf(errOut, "journalctl: offset %d is past the head (%d): waiting for it\n", next, head)
		}
		floor = head
		// A source that cannot search (the socket) is read from the first
		// retained event, the filter dropping what is before --since.
		if s, ok := src.(interface {
			OffsetAt(context.Context, time.Time) (uint64, error)
		}); ok && next == 0 && !f.since.IsZero() {
			if next, err = s.OffsetAt(ctx, f.since); err != nil {
				return err
			}
		}
		if f.lines > 0 || f.reverse {
			if err := printBackward(ctx, src, ep, next, head); err != nil {
				return brokenPipe(shown, err)
			}
			if !f.follow {
				return brokenPipe(shown, ep.p.close())
			}
			next = head + 1
		}
	}
	committed := next - 1 // with --consumer
	for {
		err := printFrom(ctx, src, ep, &next)
		if err == nil && !f.follow {
			err = ep.p.close()
		}
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
		if err == nil && (!f.follow || ep.past) {
			return nil
		}
		if err == nil {
			if next == 0 {
				next = floor + 1
			}
			_, err = src.Wait(ctx, next-1)
		}
		if f.follow && handover(err) {
			src, err = reopenSource(ctx, f.db, f.conf.pollInterval)
		}
		if f.follow && ctx.Err() != nil {
			return nil
		}
		if err != nil {
			return brokenPipe(shown, err)
		}
	}
}

// brokenPipe returns nil for err when the output's reader went away
// (events | head -1), else err.
func brokenPipe(shown *shownRows, err error) error {
	if err != nil && errors.Is(shown.err, syscall.EPIPE) {
		return nil
	}
	return err
}

// consumerPosition returns the offset after consumer name's committed one,
// and journal.ErrNoConsumer when there is no such consumer: only a writer
// registers consumers.
func consumerPosition(ctx context.Context, src source, name string) (uint64, error) {
	cs, err := src.Consumers(ctx)
	if err != nil {
		return 0, err
	}
	i := slices.IndexFunc(cs, func(c journal.ConsumerInfo) bool { return c.Name == name })
	if i < 0 {
		return 0, fmt.Errorf("%w: %q (consumers create registers one)", journal.ErrNoConsumer, name)
	}
	return cs[i].Committed + 1, nil
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
		if src, err = reopenSource(cctx, f.db, f.conf.pollInterval); err == nil {
			err = src.Commit(cctx, f.consumer, off)
		}
	}
	if err != nil {
		return src, fmt.Errorf("commit offset %d for consumer %q: %w", off, f.consumer, err)
	}
	return src, nil
}

// printFrom prints the events from offset *next to the head, page by page,
// and moves *next past them; it stops at the first event after --until.
// It tells ep.shown the offset of each row it gives the printer, in order.
func printFrom(ctx context.Context, src source, ep *eventPrinter, next *uint64) error {
	for {
		evs, err := src.Read(ctx, *next, readPage)
		for _, e := range evs {
			if err == nil && !ep.past {
				err = ep.print(e)
			}
		}
		if len(evs) > 0 {
			*next = evs[len(evs)-1].Offset + 1
		}
		if err != nil || len(evs) == 0 || ep.past {
			if ferr := ep.p.flush(); err == nil {
				err = ferr
			}
			return err
		}
	}
}

// reopenSource looks for the file's reader again, every poll while the
// file is changing hands, until ctx is done; a file source it returns
// polls every poll too.
func reopenSource(ctx context.Context, path string, poll time.Duration) (src source, err error) {
	if werr := wait.PollUntilContextCancel(ctx, poll, true, func(ctx context.Context) (bool, error) {
		src, err = openSourceEvery(ctx, path, poll)
		return err == nil || !handover(err), nil
	}); werr != nil {
		return nil, werr
	}
	return src, err
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
	err   error    // the first write error
}

func (s *shownRows) Write(p []byte) (int, error) {
	n, err := s.w.Write(p)
	if s.err == nil {
		s.err = err
	}
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
