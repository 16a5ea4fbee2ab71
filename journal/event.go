package journal

import (
	"bytes"
	"encoding/binary"
	"errors"
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
	// Object is the object as served: JSON with kind and apiVersion, or,
	// for a built-in kind that package reconcile received in protobuf (a
	// watch or a streaming list with reconcile.WireAuto), the Kubernetes
	// protobuf envelope as the apiserver sent it ("k8s\x00", then a
	// runtime.Unknown with apiVersion, kind and the message). The first
	// bytes tell: '{' or "k8s\x00"; one file may hold both. ObjectJSON
	// returns either as JSON. A synthesized DELETED (a
	// tombstone: the deletion was inferred, no object was served) carries
	// the key's last stored object in a file that keeps objects
	// (Settings.KeepObjects), read in the transaction that stored the
	// DELETED, so the final state survives retention trimming; elsewhere
	// it is nil (only Key, UID and ResourceVersion are known). Nil also
	// for journals that keep metadata only.
	Object []byte
	// Time is when the event was journaled, by the writer's wall clock,
	// but never earlier than the previous event's Time: after the clock
	// steps back, events carry the latest time stamped until the clock
	// passes it again (journal/clock.go).
	Time time.Time
	// Origin says whether the event was seen live or inferred by a relist.
	Origin Origin
	// PrevResourceVersion is, for MODIFIED, the resourceVersion the index
	// held before this event; empty otherwise.
	PrevResourceVersion string
	// Reason says why the key entered or left the journal, where the writer
	// knows: for a DELETED, whether the object is gone from the server or
	// only from this journal's scope; for an ADDED, whether it arrived from
	// another shard. Empty for ordinary events and for events written
	// before reasons existed. See Reason for the values and what a
	// consumer should do with each.
	Reason Reason
	// PrevOffset is, for a MODIFIED or a DELETED, the offset of the key's
	// previous event (its ADDED or MODIFIED: the object as it was before
	// this event, for a MODIFIED the one at PrevResourceVersion; in a
	// metadata-only journal, its metadata), taken from the key's index
	// entry in the transaction that appends this event. Read it with
	// Journal.Read(PrevOffset, 1); retention may have trimmed it since
	// (ErrTrimmed). 0 is unknown: always for an ADDED; for an event
	// written before this field existed (record versions 1 and 2, files of
	// schema 2 and older); and when the previous event carried no Object
	// or the key's index entry was written by schema 1 (no pointer). Set
	// by the journal on append; a caller's value is ignored.
	PrevOffset uint64
}

// Reason says why an event happened, where its type alone would mislead: a
// DELETED is not always a deletion. The empty Reason is an ordinary event:
// an ADDED or MODIFIED as the server sent it, or a DELETED from a file or a
// writer that did not record reasons (read it as ReasonGone, what DELETED
// meant before). Values are stable strings, shown as they are by journalctl
// (-o json "reason", the REASON column of -o wide). A reader must accept a
// value it does not know (a newer writer's) and treat a DELETED carrying
// one as ReasonGone. Event.IsDeletion says whether a consumer should act on
// a DELETED as a deletion. The reason is stored with the event (record
// version 2, below), so every reader of the file, journalctl and the
// adapters included, sees the reason the writer found.
type Reason string

// Reasons. The writer appends only these (ErrBadEvent): ReasonGone,
// ReasonLeftSelector and ReasonUnconfirmed on DELETED only, ReasonMoved on
// ADDED and DELETED.
const (
	// ReasonGone: the object was deleted on the server, or its name now
	// belongs to another UID. A journal without a label or field selector
	// knows it from the DELETED alone; one with a selector asked the
	// apiserver, which had no object of that name and UID at the event's
	// resourceVersion (or, that being compacted, has none now). Act on it
	// as a deletion.
	ReasonGone Reason = "gone"
	// ReasonLeftSelector: the object still exists on the server, with the
	// same UID, but no longer matches the journal's label or field
	// selector (its labels or fields changed), so it left this journal.
	// The apiserver sends this as a DELETED on a watch, whose Object is
	// the object as it was before the change (labels that still match)
	// with the change's resourceVersion; a relist finds the key absent
	// from the list (a tombstone, no Object). Not a deletion of the
	// object, but it left the journal's scope: a consumer whose scope is
	// the selector (it manages what matches) cleans up what it made for
	// the object as for a deletion; one whose scope is the object whatever
	// its labels must not run deletion logic for it (docs/controller-runtime.md,
	// "A delete is not always a deletion").
	ReasonLeftSelector Reason = "left-selector"
	// ReasonMoved: the key's UID hash moved out of (DELETED) or into
	// (ADDED) this journal's shard range (package shards): another
	// replica's journal holds it now, or held it before. Not a deletion
	// nor a creation: the object is unchanged on the server. A consumer
	// drops (DELETED) or takes over (ADDED) the key without acting as if
	// it had been deleted or created.
	ReasonMoved Reason = "moved"
	// ReasonUnconfirmed: a DELETED of a journal with a selector, seen on
	// a watch or inferred by a relist (the key was absent from the list),
	// whose lookup failed (network error, 5xx, throttling past the
	// retries, 403) or was not made (past the writer's budget of lookups
	// per batch, package reconcile), so the journal cannot tell ReasonGone
	// from ReasonLeftSelector. The delete is journaled all the same, never
	// dropped: the key has left this journal's scope either way. Treat it
	// as ReasonGone where acting wrongly on a deletion is cheap, or look
	// the object up on the server before acting.
	ReasonUnconfirmed Reason = "unconfirmed"
)

// IsDeletion reports whether a consumer should act on e as on the object's
// deletion: a DELETED whose reason is neither ReasonLeftSelector nor
// ReasonMoved (ReasonGone, ReasonUnconfirmed, empty, or a value this build
// does not know). False for ADDED and MODIFIED.
func (e Event) IsDeletion() bool {
	return e.Type == Deleted && e.Reason != ReasonLeftSelector && e.Reason != ReasonMoved
}

// checkReason returns why r cannot go with an event of type t, nil when it
// can.
func checkReason(t EventType, r Reason) error {
	switch r {
	case "":
		return nil
	case ReasonGone, ReasonLeftSelector, ReasonUnconfirmed:
		if t == Deleted {
			return nil
		}
	case ReasonMoved:
		if t == Added || t == Deleted {
			return nil
		}
	default:
		return fmt.Errorf("%w: unknown reason %q", ErrBadEvent, r)
	}
	return fmt.Errorf("%w: reason %q on %s", ErrBadEvent, r, t)
}

// Synthesized reports whether the event was inferred by a relist diff
// rather than seen on a watch.
func (e Event) Synthesized() bool { return e.Origin != OriginWatch }

// The first byte of every encoded record is its version; four bytes of
// CRC-32C (Castagnoli, big-endian) of the msgpack body follow it. A
// version 1 body is record (eight fields); a version 2 body is
// record and the Reason (nine fields), written only for an
// event with a non-empty Reason, so an ordinary event is stored exactly as
// before reasons existed and an old record decodes with an empty Reason.
// A version 3 body is version 2's nine fields (the Reason
// possibly empty, then PrevOffset; every integer in its shortest msgpack
// form), written only for an event with a non-zero PrevOffset; a version 1
// or 2 record decodes with PrevOffset 0.
// A version byte with the bit 0x80 (sealedRecord) set is that version
// whose Object is sealed (seal.go); without a sealed Object the bit is
// never set, so a file without sealing holds no record with the bit.
// Each version only appends fields, so the fields before them keep their
// positions (record.go reads Key and Object by position). Files that may
// hold version 2 records are schema 2, version 3 schema 3 (journal/bolt),
// which an older build refuses with ErrNewerSchema instead of reading them
// as damaged.
const (
	recordVersion       = 1
	recordVersionReason = 2
	recordVersionPrev   = 3
)

// recordFieldCount returns the number of msgpack fields of a record body
// of version v, 0 for a version this build does not know.
// The sealedRecord bit (seal.go) says the Object is sealed; it does not
// change the fields.
func recordFieldCount(v byte) int {
	switch v &^ sealedRecord {
	case recordVersion:
		return 8
	case recordVersionReason:
		return 9
	case recordVersionPrev:
		return 10
	}
	return 0
}

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// record is an Event's body as decodeBody reads it (the offset is the
// bbolt key): the eight fields of a version 1 record, in their order (a
// msgpack array, as tests marshal it).
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
// CRC-32C, then the msgpack body, a msgpack array of record's eight fields,
// then the Reason (version 2, 3) and the PrevOffset (version 3).
func encodeEvent(e *Event) ([]byte, error) {
	typ, origin := typeCodes[e.Type], originCodes[e.Origin]
	if typ == 0 {
		return nil, fmt.Errorf("journal: unknown event type %q", e.Type)
	}
	if origin == 0 {
		return nil, fmt.Errorf("journal: unknown origin %q", e.Origin)
	}
	version, fields := byte(recordVersion), 8
	switch {
	case e.PrevOffset != 0:
		version, fields = recordVersionPrev, 10
	case e.Reason != "":
		version, fields = recordVersionReason, 9
	}
	var buf bytes.Buffer
	enc := msgpack.NewEncoder(&buf)
	// Version 1 and 2 write integers in msgpack's fixed-size forms (uint 8,
	// int 64), as they always have; version 3 in their shortest forms: an
	// offset below 2^32 takes 5 bytes, not 9 (decodeBody and recordObject
	// read every integer form).
	compact := version == recordVersionPrev
	small := func(n uint8) error {
		if compact {
			return enc.EncodeUint(uint64(n))
		}
		return enc.EncodeUint8(n)
	}
	t := e.Time.UnixNano()
	err := errors.Join(enc.EncodeArrayLen(fields), small(typ), enc.EncodeString(e.Key),
		enc.EncodeString(e.UID), enc.EncodeString(e.ResourceVersion))
	if compact {
		err = errors.Join(err, enc.EncodeInt(t))
	} else {
		err = errors.Join(err, enc.EncodeInt64(t))
	}
	err = errors.Join(err, small(origin), enc.EncodeBytes(e.Object), enc.EncodeString(e.PrevResourceVersion))
	if fields > 8 {
		err = errors.Join(err, enc.EncodeString(string(e.Reason)))
	}
	if fields > 9 {
		err = errors.Join(err, enc.EncodeUint(e.PrevOffset))
	}
	if err != nil {
		return nil, err
	}
	b := buf.Bytes()
	if isSealed(e.Object) {
		version |= sealedRecord // seal.go: an older build refuses the record
	}
	out := make([]byte, 5, 5+len(b))
	out[0] = version
	binary.BigEndian.PutUint32(out[1:], crc32.Checksum(b, castagnoli))
	return append(out, b...), nil
}

// decodeEvent decodes a stored record; the result does not alias b. A
// panic of the decoder is an error matching ErrBadRecord (decodePanic).
func decodeEvent(off uint64, b []byte) (_ Event, err error) {
	defer decodePanic(&err, off, nil)
	if len(b) < 6 || recordFieldCount(b[0]) == 0 {
		return Event{}, fmt.Errorf("%w: offset %d: unknown record version", ErrBadRecord, off)
	}
	if crc32.Checksum(b[5:], castagnoli) != binary.BigEndian.Uint32(b[1:5]) {
		return Event{}, fmt.Errorf("%w: offset %d: checksum mismatch", ErrBadRecord, off)
	}
	r, reason, prev, err := decodeBody(b[5:], recordFieldCount(b[0]))
	if err != nil {
		return Event{}, fmt.Errorf("%w: offset %d: %v", ErrBadRecord, off, err)
	}
	if int(r.Type) >= len(typeNames) || r.Type == 0 || int(r.Origin) >= len(originNames) || r.Origin == 0 {
		return Event{}, fmt.Errorf("%w: offset %d: bad type or origin", ErrBadRecord, off)
	}
	if (b[0]&sealedRecord != 0) != isSealed(r.Object) {
		return Event{}, fmt.Errorf("%w: offset %d: sealed mark and object disagree", ErrBadRecord, off)
	}
	e := Event{
		Offset: off, Type: typeNames[r.Type], Key: r.Key, UID: r.UID, ResourceVersion: r.RV,
		Time: time.Unix(0, r.Time), Origin: originNames[r.Origin], PrevResourceVersion: r.PrevRV,
		Reason: Reason(reason), PrevOffset: prev,
	}
	if len(r.Object) > 0 {
		e.Object = r.Object
	}
	return e, nil
}

// decodeBody decodes a msgpack record body of fields fields (record's
// eight; the Reason as a ninth; the PrevOffset as a tenth) field by
// field. It does not hand
// the body to msgpack.Unmarshal: msgpack v5.4.1 allocates a bin field's
// declared length before reading it, so a body of a few bytes that claims
// a 4 GiB Object would allocate 4 GiB (FuzzDecodeEvent). Every declared length is checked against the bytes left.
func decodeBody(body []byte, fields int) (r record, reason string, prev uint64, err error) {
	br := bytes.NewReader(body)
	d := msgpack.NewDecoder(br)
	n, err := d.DecodeArrayLen()
	if err != nil {
		return r, "", 0, err
	}
	if n != fields {
		return r, "", 0, fmt.Errorf("%d fields, want %d", n, fields)
	}
	small := func() (uint8, error) {
		v, err := d.DecodeUint64()
		if err == nil && v > 255 {
			err = fmt.Errorf("code %d out of range", v)
		}
		return uint8(v), err
	}
	str := func(dst *string) {
		if err == nil {
			var b []byte
			b, err = boundedField(d, br)
			*dst = string(b)
		}
	}
	if r.Type, err = small(); err != nil {
		return r, "", 0, err
	}
	str(&r.Key)
	str(&r.UID)
	str(&r.RV)
	if err == nil {
		r.Time, err = d.DecodeInt64()
	}
	if err == nil {
		r.Origin, err = small()
	}
	if err != nil {
		return r, "", 0, err
	}
	if r.Object, err = boundedField(d, br); err != nil {
		return r, "", 0, err
	}
	str(&r.PrevRV)
	if fields >= 9 {
		str(&reason)
	}
	if fields >= 10 && err == nil {
		prev, err = d.DecodeUint64()
	}
	return r, reason, prev, err
}

// boundedField reads one msgpack str or bin field (nil and empty give
// nil), refusing a declared length longer than the bytes left in br, the
// reader d decodes from. msgpack v5 allocates a []byte field's declared
// length before reading it, and up to 1 MiB of a string's.
func boundedField(d *msgpack.Decoder, br *bytes.Reader) ([]byte, error) {
	n, err := d.DecodeBytesLen()
	if err != nil || n <= 0 {
		return nil, err
	}
	if n > br.Len() {
		return nil, fmt.Errorf("field of %d bytes in %d bytes left", n, br.Len())
	}
	b := make([]byte, n)
	if err := d.ReadFull(b); err != nil {
		return nil, err
	}
	return b, nil
}
