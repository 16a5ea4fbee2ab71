package journal

import (
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"time"

	"github.com/vmihailenco/msgpack/v5"
)

// EventType is the kind of change, with the values of the Kubernetes watch
// event types (k8s.io/apimachinery/pkg/watch).
type EventType string

// Event types. Bookmarks and errors never enter the journal.
const (
	Added    EventType = "ADDED"
	Modified EventType = "MODIFIED"
	Deleted  EventType = "DELETED"
)

// Origin says how the journal learned of an event.
type Origin string

// Origins.
const (
	// OriginWatch: the event was seen live on a watch.
	OriginWatch Origin = "watch"
	// OriginRelist: inferred by diffing a list against the index, after the
	// initial list, a 410 Gone, or a divergence found by a verify.
	OriginRelist Origin = "relist"
	// OriginRestart: inferred by the relist that followed a process restart
	// whose stored resourceVersion was no longer served.
	OriginRestart Origin = "restart"
)

// Event is one journal entry.
type Event struct {
	// Offset is the event's position in the journal, from 1. It is set by
	// the journal on append.
	Offset uint64
	// Type is ADDED, MODIFIED or DELETED.
	Type EventType
	// Key is <namespace>/<name>, or <name> for a cluster-scoped object.
	Key string
	// UID is the object's metadata.uid.
	UID string
	// ResourceVersion is the object's metadata.resourceVersion as served
	// (for a DELETED seen on a watch, the deletion's), or for a synthesized
	// DELETED the last resourceVersion the index held. Opaque.
	ResourceVersion string
	// Object is the object as served, in JSON. It is nil for a synthesized
	// DELETED (a tombstone: only Key, UID and ResourceVersion are known) and
	// for journals that keep metadata only.
	Object []byte
	// Time is when the event was journaled.
	Time time.Time
	// Origin says whether the event was seen live or inferred by a relist.
	Origin Origin
	// PrevResourceVersion is, for MODIFIED, the resourceVersion the index
	// held before this event; empty otherwise.
	PrevResourceVersion string
}

// Synthesized reports whether the event was inferred by a relist diff
// rather than seen on a watch.
func (e Event) Synthesized() bool { return e.Origin != OriginWatch }

// recordVersion is the first byte of every encoded record; four bytes of
// CRC-32C (Castagnoli, big-endian) of the msgpack body follow it.
const recordVersion = 1

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// record is the msgpack form of an Event (the offset is the bbolt key).
type record struct {
	_msgpack struct{} `msgpack:",as_array"`
	Type     uint8
	Key      string
	UID      string
	RV       string
	Time     int64 // Unix nanoseconds
	Origin   uint8
	Object   []byte
	PrevRV   string
}

var typeCodes = map[EventType]uint8{Added: 1, Modified: 2, Deleted: 3}
var typeNames = [...]EventType{0: "", 1: Added, 2: Modified, 3: Deleted}
var originCodes = map[Origin]uint8{OriginWatch: 1, OriginRelist: 2, OriginRestart: 3}
var originNames = [...]Origin{0: "", 1: OriginWatch, 2: OriginRelist, 3: OriginRestart}

// encodeEvent returns the stored form of e: one version byte, the body's
// CRC-32C, then the msgpack body.
func encodeEvent(e *Event) ([]byte, error) {
	r := record{
		Type: typeCodes[e.Type], Key: e.Key, UID: e.UID, RV: e.ResourceVersion,
		Time: e.Time.UnixNano(), Origin: originCodes[e.Origin], Object: e.Object,
		PrevRV: e.PrevResourceVersion,
	}
	if r.Type == 0 {
		return nil, fmt.Errorf("journal: unknown event type %q", e.Type)
	}
	if r.Origin == 0 {
		return nil, fmt.Errorf("journal: unknown origin %q", e.Origin)
	}
	b, err := msgpack.Marshal(&r)
	if err != nil {
		return nil, err
	}
	out := make([]byte, 5, 5+len(b))
	out[0] = recordVersion
	binary.BigEndian.PutUint32(out[1:], crc32.Checksum(b, castagnoli))
	return append(out, b...), nil
}

// decodeEvent decodes a stored record; the result does not alias b.
func decodeEvent(off uint64, b []byte) (Event, error) {
	if len(b) < 6 || b[0] != recordVersion {
		return Event{}, fmt.Errorf("%w: offset %d: unknown record version", ErrBadRecord, off)
	}
	if crc32.Checksum(b[5:], castagnoli) != binary.BigEndian.Uint32(b[1:5]) {
		return Event{}, fmt.Errorf("%w: offset %d: checksum mismatch", ErrBadRecord, off)
	}
	var r record
	if err := msgpack.Unmarshal(b[5:], &r); err != nil {
		return Event{}, fmt.Errorf("%w: offset %d: %v", ErrBadRecord, off, err)
	}
	if int(r.Type) >= len(typeNames) || r.Type == 0 || int(r.Origin) >= len(originNames) || r.Origin == 0 {
		return Event{}, fmt.Errorf("%w: offset %d: bad type or origin", ErrBadRecord, off)
	}
	e := Event{
		Offset: off, Type: typeNames[r.Type], Key: r.Key, UID: r.UID, ResourceVersion: r.RV,
		Time: time.Unix(0, r.Time), Origin: originNames[r.Origin], PrevResourceVersion: r.PrevRV,
	}
	if len(r.Object) > 0 {
		e.Object = r.Object
	}
	return e, nil
}

// now is the clock for event times; a variable so tests can fix it.
var now = time.Now
