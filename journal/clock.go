package journal

// Event times never go back.
//
// An event's Time is the wall clock when it was journaled, and OffsetAt
// (retention by age, journalctl --since and --to-time, Consumer.SeekTime)
// finds a time by binary search over offsets, which is right only while
// times do not decrease with offsets. The wall clock can step back (NTP
// correcting a clock that ran ahead, a VM restored, an operator's date
// command), and a relist's events are stamped when staged, before the
// watch events journaled while the list ran.
//
// So every event is stamped no earlier than the latest time stamped in the
// file: Time = max(its time, that latest time), the latest time kept in
// the meta bucket (metaLastTime) in the transaction that appends, so that
// it outlives restarts and retention trimming the journal empty.
//
// After the clock steps back by D, events are stamped with the latest
// time until the clock passes it again (at most D later): their Time is
// then later than the wall clock at which they were journaled, by at most
// D, and several events may share one Time. OffsetAt stays exact over
// those stamps; relative to the stepped clock, retention by age keeps
// such events up to D longer, and --since T for a T inside the step finds
// them from the first one stamped at or after T. Nothing is skipped or
// read twice. The same holds for a clock that ran far ahead (a wrong date
// set by hand) and was then corrected: the stamps stay at the wrong time
// until the clock reaches it, and retention by age keeps those events
// until then (the event and byte limits still trim them). Keeping too
// much is the side we choose: a time that went back would make OffsetAt
// skip events, and retention by age trim events it should keep. A file
// that records no latest time (no metaLastTime) starts from the time of
// its last retained event; times it holds from before a
// step back are not repaired, and OffsetAt over them may land anywhere in
// the stepped-back stretch.

import (
	"encoding/binary"
	"time"

	"github.com/watchjournal/watchjournal/internal/storage"
)

// metaLastTime is the latest event time stamped in the file, Unix
// nanoseconds as 8 bytes big-endian.
const metaLastTime = "lastTime"

// stamp sets e.Time, j.now() when it is zero, to no earlier than the
// latest time stamped in the file, and records it as the latest. It
// reports whether it raised a time e already had.
func (j *Journal) stamp(tx storage.Tx, e *Event) (raised bool, err error) {
	if e.Time.IsZero() {
		e.Time = j.now()
	}
	last, ok := lastTime(tx)
	t := e.Time.UnixNano()
	switch {
	case ok && t < last:
		e.Time = time.Unix(0, last)
		return true, nil
	case ok && t == last:
		return false, nil
	}
	return false, tx.SetMeta(metaLastTime, binary.BigEndian.AppendUint64(nil, uint64(t)))
}

// lastTime returns the latest time stamped in the file, in Unix
// nanoseconds: metaLastTime, or for a file that has none the time of the
// last retained event; false when neither is there.
func lastTime(tx storage.Tx) (int64, bool) {
	if b := tx.Meta(metaLastTime); len(b) == 8 {
		return int64(binary.BigEndian.Uint64(b)), true
	}
	off := tx.LastOffset()
	if off == 0 {
		return 0, false
	}
	e, err := decodeEvent(off, tx.Record(off))
	if err != nil {
		return 0, false
	}
	return e.Time.UnixNano(), true
}
