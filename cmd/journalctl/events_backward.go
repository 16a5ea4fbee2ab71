package main

// events -n N and -r read back from the head. Reads go forward (source.Read
// returns events from an offset, at most about 4 MiB of records a call),
// so going back is done in windows of offsets, each read forward, the one
// before it next. Objects may be a MiB each: what is read and held is
// bounded by what is printed and by bytes, never by a page of readPage
// events (with objects of 900 KiB, a page is 880 MiB read to print five).
//
//   - -n N without a filter: offsets are contiguous from the first
//     retained one, so the last N events are head-N+1 to head. Only they
//     are read, forward, streamed to the printer.
//   - -n N with filters (--key, --type, --since, ...): windows back from
//     the head, of N events and doubling up to readPage, find where the
//     last N matches start, keeping offsets only; then the events from
//     there to the head are printed forward through the filters. What is
//     read is at most twice the span of the events printed.
//   - -r: windows back from the head, sized so that one holds about
//     reverseBytes of events as far as the sizes read so far tell (the
//     first: reverseFirst events), each printed newest first.
//
// --since ends the search at the newest event before it (every earlier
// one is before it too), as reading back always has.

import (
	"context"

	"github.com/watchjournal/watchjournal/journal"
)

// reverseBytes is about how many bytes of events -r holds at once; the
// first window is reverseFirst events, the later ones sized from the
// events read so far.
const (
	reverseBytes = 16 << 20
	reverseFirst = 16
)

// printBackward prints, from the events at offsets from (0: the first
// retained) to head that pass the filters, the last f.lines (all for 0):
// newest first with f.reverse, else in offset order.
func printBackward(ctx context.Context, src source, ep *eventPrinter, from, head uint64) error {
	st, err := src.Stats(ctx)
	if err != nil {
		return err
	}
	if st.FirstOffset == 0 {
		return nil // nothing retained
	}
	lo := max(from, st.FirstOffset, 1)
	if lo > head {
		return ep.p.flush()
	}
	if ep.f.reverse {
		return printNewestFirst(ctx, src, ep, lo, head)
	}
	start, err := lastLinesStart(ctx, src, ep, lo, head)
	if err != nil {
		return err
	}
	if err := scanRange(ctx, src, start, head, ep.print); err != nil {
		return err
	}
	return ep.p.flush()
}

// filtering reports whether f keeps only some events.
func (f *eventsFlags) filtering() bool {
	return f.key != "" || f.namespace != "" || f.typ != "" || f.origin != "" || f.reason != "" ||
		!f.since.IsZero() || !f.until.IsZero()
}

// lastLinesStart returns the offset in lo..head from which the events
// that pass the filters are the last f.lines of them: the f.lines-th
// newest match, the oldest match when there are fewer, and head+1 when
// none.
func lastLinesStart(ctx context.Context, src source, ep *eventPrinter, lo, head uint64) (uint64, error) {
	f := ep.f
	want := uint64(f.lines)
	if !f.filtering() {
		if head-lo+1 <= want {
			return lo, nil
		}
		return head - want + 1, nil
	}
	found, oldest := uint64(0), head+1
	size := want
	for hi := head; ; {
		start := lo
		if hi-lo+1 > size {
			start = hi - size + 1
		}
		var matches []uint64 // in start..hi, after the newest event before --since
		before := false      // an event before --since was read
		err := scanRange(ctx, src, start, hi, func(e journal.Event) error {
			if !f.since.IsZero() && e.Time.Before(f.since) {
				matches, before = matches[:0], true
				return nil
			}
			if keep, _ := ep.f.keep(e); keep {
				matches = append(matches, e.Offset)
			}
			return nil
		})
		if err != nil {
			return 0, err
		}
		if need := want - found; uint64(len(matches)) >= need {
			return matches[uint64(len(matches))-need], nil
		}
		if len(matches) > 0 {
			found, oldest = found+uint64(len(matches)), matches[0]
		}
		if before || start <= lo {
			return oldest, nil
		}
		hi, size = start-1, min(2*size, max(want, readPage))
	}
}

// printNewestFirst prints the events in lo..head that pass the filters,
// newest first, the last f.lines of them (all for 0), a window at a time.
func printNewestFirst(ctx context.Context, src source, ep *eventPrinter, lo, head uint64) error {
	f := ep.f
	left := f.lines // rows still to print; 0: all
	size := uint64(reverseFirst)
	var bytesRead, eventsRead uint64
	sinceFlush := 0
	for hi := head; ; {
		if left > 0 && !f.filtering() {
			size = min(size, uint64(left))
		}
		start := lo
		if hi-lo+1 > size {
			start = hi - size + 1
		}
		var win []journal.Event // the matches in start..hi, oldest first
		before := false         // an event before --since was read
		err := scanRange(ctx, src, start, hi, func(e journal.Event) error {
			bytesRead += eventBytes(e)
			eventsRead++
			if !f.since.IsZero() && e.Time.Before(f.since) {
				win, before = win[:0], true
				return nil
			}
			if keep, _ := ep.f.keep(e); !keep {
				return nil
			}
			if win = append(win, e); left > 0 && len(win) > left {
				win = win[1:] // only the newest left are printed
			}
			return nil
		})
		if err != nil {
			return err
		}
		for i := len(win) - 1; i >= 0; i-- {
			if err := ep.print(win[i]); err != nil {
				return err
			}
			// Flushed every readPage rows, as when a window was
			// readPage events: a table's columns line up in each block.
			if sinceFlush++; sinceFlush == readPage {
				if err := ep.p.flush(); err != nil {
					return err
				}
				sinceFlush = 0
			}
		}
		if left > 0 {
			if left -= len(win); left == 0 {
				break
			}
		}
		if before || start <= lo {
			break
		}
		hi = start - 1
		avg := max(bytesRead/max(eventsRead, 1), 1) // bytes an event, so far
		size = min(max(reverseBytes/avg, 1), readPage)
	}
	return ep.p.flush()
}

// eventBytes is about the bytes event e holds.
func eventBytes(e journal.Event) uint64 {
	return uint64(len(e.Object) + len(e.Key) + len(e.UID) + len(e.ResourceVersion) + len(e.PrevResourceVersion) + 64)
}

// scanRange calls fn for each event at offsets lo to hi, in order, reading
// a page (at most about 4 MiB of records) at a time.
func scanRange(ctx context.Context, src source, lo, hi uint64, fn func(journal.Event) error) error {
	for next := lo; next <= hi; {
		evs, err := src.Read(ctx, next, int(min(hi-next+1, readPage)))
		if err != nil {
			return err
		}
		if len(evs) == 0 {
			return nil
		}
		for _, e := range evs {
			if e.Offset > hi {
				return nil
			}
			if err := fn(e); err != nil {
				return err
			}
		}
		next = evs[len(evs)-1].Offset + 1
	}
	return nil
}
