package adapt

// The old object of an update (Handle's OnUpdate).
//
// A MODIFIED record holds the new object and PrevResourceVersion, not the
// old object. The old one is in the journal all the same: it is the
// object of the key's previous event, the ADDED or MODIFIED that set the
// resourceVersion PrevResourceVersion names, unless retention trimmed it.
// The file keeps no link from an event to the key's previous one (the
// index entry points at the newest only), so history finds it:
//
//   - forward: Handle tells it every event it delivers; it remembers the
//     offset of each key's latest event.
//   - backward: for a key it has not passed yet (its last change came
//     before the consumer's position), it reads the journal backward from
//     where Handle started, DefaultBatch events a step (each Journal.Read
//     bounded to about 4 MiB; only keys and offsets are kept), only as far
//     as that key, noting every key it passes on the way. Over a Handle's
//     life each retained event before its start is read at most once.
//
// Cost: per MODIFIED one map lookup and one Journal.Read of one record.
// The first MODIFIED of a key last changed long before the consumer's
// position reads back to that change: at worst, once per Handle, every
// event retained before its start (what journalctl events reads). Memory:
// one map entry (a 64-bit hash of the key and an offset: 38 bytes with
// the map's overhead, measured at a million entries with Go 1.26) per live key passed forward and per key passed
// backward; an informer keeps each key's whole object.
//
// The old object is the previous event's object when that event is still
// retained, carries an object, and is the key's ADDED or MODIFIED at
// PrevResourceVersion with the same UID. Otherwise — trimmed by retention,
// a journal that keeps metadata only, no PrevResourceVersion — it is the
// metadata-only object Handle gave before: name, namespace, UID and
// PrevResourceVersion, no labels, annotations, spec or data.

import (
	"errors"
	"hash/maphash"

	"github.com/watchjournal/watchjournal/journal"
)

// history finds the previous event of a key for Handle.
type history struct {
	j    *journal.Journal
	seed maphash.Seed
	last map[uint64]uint64 // hash of a key → offset of its latest event passed
	low  uint64            // the events from low on (up to the last delivered) are passed
	done bool              // nothing retained below low is left to pass
}

// newHistory returns a history for a Handle whose first event is at
// offset start (0: the first retained).
func newHistory(j *journal.Journal, start uint64) *history {
	return &history{j: j, seed: maphash.MakeSeed(), last: map[uint64]uint64{}, low: start, done: start <= 1}
}

// hash is the map's key for key: 8 bytes in place of the string. Two keys
// with one hash (for a million keys, about one chance in 37 million) cost
// nothing but a metadata-only old object: oldObject checks the record's
// key.
func (h *history) hash(key string) uint64 { return maphash.String(h.seed, key) }

// passed records e, the event delivered after every event passed so far.
// A DELETED forgets its key: a later MODIFIED of the key comes after an
// ADDED, passed too, so memory holds the live keys passed.
func (h *history) passed(e journal.Event) {
	if e.Type == journal.Deleted {
		delete(h.last, h.hash(e.Key))
		return
	}
	h.last[h.hash(e.Key)] = e.Offset
}

// oldObject returns the object of the MODIFIED e's previous event (see
// the top of the file), nil when there is none to give. Call it before
// passed(e).
func (h *history) oldObject(e journal.Event) ([]byte, error) {
	if e.PrevResourceVersion == "" {
		return nil, nil
	}
	off, err := h.previous(e.Key)
	if off == 0 || err != nil {
		return nil, err
	}
	evs, err := h.j.Read(off, 1)
	if errors.Is(err, journal.ErrCompacted) {
		return nil, nil // trimmed since it was passed
	}
	if err != nil || len(evs) == 0 {
		return nil, err
	}
	p := evs[0]
	if p.Offset != off || p.Key != e.Key || p.UID != e.UID || p.Type == journal.Deleted ||
		p.Object == nil || p.ResourceVersion != e.PrevResourceVersion {
		return nil, nil
	}
	return p.Object, nil
}

// previous returns the offset of key's latest event passed, reading
// backward as far as needed; 0 when no retained event has the key.
func (h *history) previous(key string) (uint64, error) {
	for {
		if off, ok := h.last[h.hash(key)]; ok {
			return off, nil
		}
		if h.done {
			return 0, nil
		}
		if err := h.back(); err != nil {
			return 0, err
		}
	}
}

// back passes the retained events of one read below low, newest first,
// noting keys not passed yet.
func (h *history) back() error {
	lo := uint64(1)
	if h.low > journal.DefaultBatch {
		lo = h.low - journal.DefaultBatch
	}
	type seen struct{ key, off uint64 }
	var evs []seen // not the events: a read holds their objects
	for from := lo; from < h.low; {
		got, err := h.j.Read(from, int(h.low-from))
		var ce *journal.CompactedError
		if errors.As(err, &ce) {
			if ce.First >= h.low {
				h.done = true // trimmed: nothing below low is retained
				return nil
			}
			lo, from, evs = ce.First, ce.First, evs[:0]
			continue
		}
		if err != nil {
			return err
		}
		if len(got) == 0 {
			break
		}
		for _, e := range got {
			if e.Offset < h.low {
				evs = append(evs, seen{h.hash(e.Key), e.Offset})
			}
		}
		from = got[len(got)-1].Offset + 1
	}
	for i := len(evs) - 1; i >= 0; i-- {
		if _, ok := h.last[evs[i].key]; !ok {
			h.last[evs[i].key] = evs[i].off
		}
	}
	h.low = lo
	h.done = lo <= 1
	return nil
}
