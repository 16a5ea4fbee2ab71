// Package position is the one warm standby under leader election, that
// of jcache.Exact (Standby; standby.go says how it works).
//
// A position is a resourceVersion P: every change at or before P is
// reconciled. The leader computes P from its journal and its committed
// offset (Tracker, At), publishes it on a Lease of its own (Lease,
// Standby), and a new leader places P in its own journal (StartFor): it
// starts right after the last event P covers, conservatively (it replays
// more, never less). A standby's Follower commits its consumer behind
// the published P, so its registered consumer does not hold retention
// back. Each replica keeps its own journal; offsets never cross replicas,
// resourceVersions do (ordered only with CompareResourceVersion).
package position

import (
	"errors"
	"strconv"
	"sync"

	"k8s.io/apimachinery/pkg/util/resourceversion"

	"github.com/watchjournal/watchjournal/journal"
)

// Resource names the resource a position belongs to: the watch's GVR,
// namespace and selectors (not the shard range, the kind, nor the
// metadata-only choice, which do not change resourceVersions). A leader
// of another resource's journal ignores the position.
func Resource(r journal.Resource) string {
	r.ShardSelector, r.MetadataOnly, r.Kind, r.APIVersion = "", false, "", ""
	return r.String()
}

// Signal tells a Standby's publisher that a position moved, and counts
// commits (for Config.Commits). The zero value is not usable; make it
// with NewSignal.
type Signal struct {
	mu      sync.Mutex
	commits int
	moved   chan struct{}
}

// NewSignal returns a Signal.
func NewSignal() *Signal { return &Signal{moved: make(chan struct{}, 1)} }

func (s *Signal) commit() {
	s.mu.Lock()
	s.commits++
	s.mu.Unlock()
}

func (s *Signal) move() {
	select {
	case s.moved <- struct{}{}:
	default:
	}
}

// Tracker is the position of one consumer on one journal: it follows the
// consumer's commits (NoteCommit) and keeps the scan state of At, so each
// commit scans only the events after the previous one. The zero value is
// usable (without a Signal).
type Tracker struct {
	Signal *Signal // told when the position moves and on each commit; may be nil

	mu      sync.Mutex
	pos     string // "" before one is known
	scanned uint64 // At has looked at every event up to here
	watchRV string // RV of the last watch event at or before scanned
}

// Position returns the position, "" before one is known.
func (t *Tracker) Position() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.pos
}

// Set sets the position (a new leader: publishes never go below where it
// starts).
func (t *Tracker) Set(pos string) {
	t.mu.Lock()
	t.pos = pos
	t.mu.Unlock()
}

// NoteCommit records that the consumer committed offset p of j: one more
// commit, and the position moves to what p covers (At), never back.
func (t *Tracker) NoteCommit(j *journal.Journal, p uint64) {
	if t.Signal != nil {
		t.Signal.commit()
	}
	t.Note(j, p)
}

// Note moves the position to what committed offset p of j covers, never
// back. It is also how a quiet resource's position follows bookmarks:
// with the commit at the head, the journal's resourceVersion moves on.
func (t *Tracker) Note(j *journal.Journal, p uint64) {
	pos, err := t.At(j, p)
	if err != nil || pos == "" {
		return
	}
	t.mu.Lock()
	moved := t.pos == "" || Later(pos, t.pos)
	if moved {
		t.pos = pos
	}
	t.mu.Unlock()
	if moved && t.Signal != nil {
		t.Signal.move()
	}
}

// Later reports whether resourceVersion a is past b. RVs that do not
// compare (CompareResourceVersion refuses them) count as later when they
// differ: the newest commit's position is the one to publish.
func Later(a, b string) bool {
	n, err := resourceversion.CompareResourceVersion(a, b)
	if err != nil {
		return a != b
	}
	return n > 0
}

// Comparable reports whether pos is a resourceVersion that
// CompareResourceVersion orders; StartFor places one that is not ("",
// or an apiserver's opaque form) only by equality with a watch event's,
// and otherwise at the whole journal.
func Comparable(pos string) bool {
	_, err := resourceversion.CompareResourceVersion(pos, pos)
	return err == nil
}

// At returns the position that committed offset p of j covers: a
// resourceVersion every change at or before which is reconciled.
//
//   - The journal's resourceVersion R, read before its head H, when p is
//     at or past H: every event reflecting the state at R is at or before
//     H (a relist sets R in the transaction that appends its last chunk).
//   - Otherwise the RV of the last event at or before p that was seen on a
//     watch. Watch events' RVs grow with their offsets (a watch resumes
//     after the last one, a relist's list is newer), and the state after
//     such an event is the state at its RV. A relist's events are not
//     used: they are in key order, an ADDED carries the object's RV and a
//     synthesized DELETED the last one the index held, so a relist's event
//     committed before the rest of its relist says nothing of the others.
//
// "" when p covers no such event (the caller keeps its last position).
func (t *Tracker) At(j *journal.Journal, p uint64) (string, error) {
	rv, err := j.ResourceVersion()
	if err != nil {
		return "", err
	}
	head, err := j.Head()
	if err != nil {
		return "", err
	}
	if p >= head && rv != "" {
		return rv, nil
	}
	t.mu.Lock()
	from, found := t.scanned, t.watchRV
	t.mu.Unlock()
	if p > from {
		e, ok, err := lastBefore(j, p, from, func(e journal.Event) bool { return e.Origin == journal.OriginWatch })
		if err != nil {
			return "", err
		}
		if ok {
			found = e.ResourceVersion
		}
		t.mu.Lock()
		t.scanned, t.watchRV = p, found
		t.mu.Unlock()
	}
	return found, nil
}

// lastBefore scans j backwards from offset hi down to offset lo+1 and
// returns the last event that match accepts; false when none does (or
// retention trimmed the rest of the range).
func lastBefore(j *journal.Journal, hi, lo uint64, match func(journal.Event) bool) (journal.Event, bool, error) {
	const window = journal.DefaultBatch
	for hi > lo {
		from := lo + 1
		if hi-lo > window {
			from = hi - window + 1
		}
		var evs []journal.Event
		for at := from; at <= hi; {
			got, err := j.Read(at, int(hi-at+1))
			if errors.Is(err, journal.ErrTrimmed) {
				var te *journal.TrimmedError
				if errors.As(err, &te) && te.First > at && te.First <= hi {
					at = te.First
					from = te.First
					continue
				}
				break
			}
			if err != nil {
				return journal.Event{}, false, err
			}
			if len(got) == 0 {
				break
			}
			evs = append(evs, got...)
			at = got[len(got)-1].Offset + 1
		}
		for i := len(evs) - 1; i >= 0; i-- {
			if evs[i].Offset <= hi && match(evs[i]) {
				return evs[i], true, nil
			}
		}
		if first, err := firstRetained(j); err != nil {
			return journal.Event{}, false, err
		} else if from <= first {
			return journal.Event{}, false, nil
		}
		hi = from - 1
	}
	return journal.Event{}, false, nil
}

// firstRetained returns the first retained offset, head + 1 when none is.
func firstRetained(j *journal.Journal) (uint64, error) {
	evs, err := j.Read(0, 1)
	if err != nil {
		return 0, err
	}
	if len(evs) == 0 {
		h, err := j.Head()
		return h + 1, err
	}
	return evs[0].Offset, nil
}

// StartFor returns the offset of j to start delivering at for the
// published position pos, looking at the events after offset floor only
// (0: all): right after the last event that pos covers, so that every
// change after pos is delivered and, of those before it, only what the
// search cannot rule out. ok false means pos cannot be placed in j, and
// why says why: the caller replays every object (a resync).
//
//   - j's resourceVersion, read before its head H, is at or before pos:
//     H + 1 (all j holds is covered).
//   - Otherwise the last event seen on a watch whose RV is at or before
//     pos (CompareResourceVersion; scanning back from the head, the first
//     found, as watch events' RVs grow with offsets): the offset after it.
//     The relist events between it and the next watch event are
//     delivered: their list's RV is unknown, so they may be past pos.
//   - RVs that do not compare: the last watch event whose RV equals pos.
//   - None found after floor > 0: not ok (the caller stays at floor).
//   - None found and nothing trimmed (the first retained offset is 1):
//     1, the whole journal.
//   - None found and retention trimmed j: not ok, the events between pos
//     and the first retained one are gone.
func StartFor(j *journal.Journal, pos string, floor uint64) (start uint64, why string, ok bool, err error) {
	rv, err := j.ResourceVersion()
	if err != nil {
		return 0, "", false, err
	}
	head, err := j.Head()
	if err != nil {
		return 0, "", false, err
	}
	if _, err := resourceversion.CompareResourceVersion(pos, pos); err == nil {
		if rv != "" {
			if n, err := resourceversion.CompareResourceVersion(rv, pos); err == nil && n <= 0 {
				return head + 1, "the journal's resourceVersion is at or before the position", true, nil
			}
		}
		e, found, err := lastBefore(j, head, floor, func(e journal.Event) bool {
			if e.Origin != journal.OriginWatch {
				return false
			}
			n, err := resourceversion.CompareResourceVersion(e.ResourceVersion, pos)
			return err == nil && n <= 0
		})
		if err != nil {
			return 0, "", false, err
		}
		if found {
			return e.Offset + 1, "after the last watch event at or before the position, resourceVersion " + e.ResourceVersion, true, nil
		}
	} else {
		e, found, err := lastBefore(j, head, floor, func(e journal.Event) bool {
			return e.Origin == journal.OriginWatch && e.ResourceVersion == pos
		})
		if err != nil {
			return 0, "", false, err
		}
		if found {
			return e.Offset + 1, "after the watch event of the position's resourceVersion (resourceVersions that do not compare)", true, nil
		}
	}
	if floor > 0 {
		return 0, "no watch event at or before the position after offset " + strconv.FormatUint(floor, 10), false, nil
	}
	first, err := firstRetained(j)
	if err != nil {
		return 0, "", false, err
	}
	if first <= 1 {
		return 1, "no watch event at or before the position and nothing trimmed: the whole journal", true, nil
	}
	return 0, "the position is older than this journal's retention (first retained offset " + strconv.FormatUint(first, 10) + ")", false, nil
}
