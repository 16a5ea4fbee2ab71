package journal

// Fuzz targets for the record and index decoders. A stored record is one
// version byte, the CRC-32C of its body, then the msgpack body: random
// bytes almost never carry a matching CRC, so a target that mutates whole
// records tests the checksum and little else. FuzzDecodeEvent therefore
// mutates the body and computes the CRC itself, so every input reaches the
// msgpack decoder; FuzzDecodeEventChecksum checks the other half, that a
// record whose bytes changed after the CRC was computed is refused.

import (
	"bytes"
	"encoding/binary"
	"errors"
	"hash/crc32"
	"math"
	"runtime"
	"testing"
	"time"
)

// fuzzSeedEvents are valid events of each type and origin.
var fuzzSeedEvents = []Event{
	{Type: Added, Key: "ns/a", UID: "u", ResourceVersion: "1", Origin: OriginWatch, Object: []byte(`{}`), Time: time.Unix(0, 5)},
	{Type: Deleted, Key: "a", UID: "u", ResourceVersion: "W/x", Origin: OriginRestart},
	{Type: Modified, Key: "ns/b", UID: "u2", ResourceVersion: "9007199254740993", PrevResourceVersion: "7", Origin: OriginRelist},
	{Type: Deleted, Key: "ns/c", UID: "u3", ResourceVersion: "8", Origin: OriginWatch, Reason: ReasonLeftSelector, Object: []byte(`{}`)},
	{Type: Modified, Key: "ns/d", UID: "u4", ResourceVersion: "9", PrevResourceVersion: "8", Origin: OriginWatch, PrevOffset: 1 << 40},
	{Type: Deleted, Key: "ns/e", UID: "u5", ResourceVersion: "10", Origin: OriginRelist, Reason: ReasonGone, PrevOffset: 3},
	// A sealed object's envelope (seal.go): the record's sealed mark is set.
	{Type: Added, Key: "ns/f", UID: "u6", ResourceVersion: "11", Origin: OriginWatch, Object: append([]byte("\x00wjs\x01"), make([]byte, 36)...)},
}

// addSeedBodies adds the msgpack body of each of fuzzSeedEvents' stored
// records (the record without its 5-byte header) to f's corpus.
func addSeedBodies(f *testing.F) {
	f.Helper()
	for _, e := range fuzzSeedEvents {
		rec, err := encodeEvent(&e)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(rec[5:])
	}
}

// sealRecord returns the stored form of a msgpack body: the version byte
// and the body's CRC-32C in front of it, as encodeEvent writes them.
func sealRecord(body []byte) []byte { return sealRecordVersion(recordVersion, body) }

// sealRecordVersion is sealRecord with the version byte v.
func sealRecordVersion(v byte, body []byte) []byte {
	out := make([]byte, 5, 5+len(body))
	out[0] = v
	binary.BigEndian.PutUint32(out[1:], crc32.Checksum(body, castagnoli))
	return append(out, body...)
}

// Decoding any msgpack body under a correct header, of each record
// version, returns an event or ErrBadRecord, never panics; a body that
// decodes re-encodes to an equal event.
func FuzzDecodeEvent(f *testing.F) {
	addSeedBodies(f)
	f.Add([]byte{})
	f.Add([]byte{0x90})             // an empty msgpack array
	f.Add([]byte{0x98, 1, 0xa0})    // an array that claims 8 elements and holds 2
	f.Add([]byte{0x92, 4, 0xa1, 0}) // type 4 does not exist
	f.Add(claimsHugeObject)
	f.Fuzz(func(t *testing.T, body []byte) {
		for _, v := range []byte{recordVersion, recordVersionReason, recordVersionPrev, recordVersion | sealedRecord, recordVersionPrev | sealedRecord} {
			e, err := decodeEvent(7, sealRecordVersion(v, body))
			if err != nil {
				if !errors.Is(err, ErrBadRecord) {
					t.Fatalf("version %d: decode error %v is not ErrBadRecord", v, err)
				}
				continue
			}
			if e.Offset != 7 {
				t.Fatalf("version %d: offset %d, want 7", v, e.Offset)
			}
			b2, err := encodeEvent(&e)
			if err != nil {
				t.Fatalf("version %d: decoded %+v does not encode: %v", v, e, err)
			}
			e2, err := decodeEvent(7, b2)
			if err != nil {
				t.Fatalf("version %d: re-encoded record does not decode: %v", v, err)
			}
			if e2.Type != e.Type || e2.Key != e.Key || e2.UID != e.UID || e2.ResourceVersion != e.ResourceVersion ||
				e2.Origin != e.Origin || !bytes.Equal(e2.Object, e.Object) || !e2.Time.Equal(e.Time) ||
				e2.PrevResourceVersion != e.PrevResourceVersion || e2.Reason != e.Reason || e2.PrevOffset != e.PrevOffset {
				t.Fatalf("version %d: round trip: %+v != %+v", v, e2, e)
			}
		}
	})
}

// claimsHugeObject is a record body whose Object claims 4 GiB (bin 32)
// and holds one byte.
var claimsHugeObject = []byte{0x98, 1, 0xa0, 0xa0, 0xa0, 0, 1, 0xc6, 0xff, 0xff, 0xff, 0xff, 'x', 0xa0}

// A body whose length fields claim more bytes than it has is refused
// without allocating what it claims, as msgpack.Unmarshal would (the
// claimed 4 GiB).
func TestDecodeEvent_LengthPastBody(t *testing.T) {
	bodies := map[string][]byte{
		"object bin32 4GiB": claimsHugeObject,
		"object bin32 2GiB": {0x98, 1, 0xa0, 0xa0, 0xa0, 0, 1, 0xc6, 0x7f, 0xff, 0xff, 0xff, 'x', 0xa0},
		"key str32 4GiB":    {0x98, 1, 0xdb, 0xff, 0xff, 0xff, 0xff, 'k'},
		"uid str32 1MiB":    {0x98, 1, 0xa0, 0xdb, 0, 0x10, 0, 0, 'u'},
		"nine fields in v1": {0x99, 1, 0xa0, 0xa0, 0xa0, 0, 1, 0xc0, 0xa0, 0xa0},
		"type past a byte":  {0x98, 0xcd, 1, 1, 0xa0, 0xa0, 0xa0, 0, 1, 0xc0, 0xa0},
	}
	for name, body := range bodies {
		rec := sealRecord(body)
		// TotalAlloc counts every goroutine's allocations (the race
		// detector's runtime and earlier tests' leftovers too), so the
		// least of five tries is the decode's own: under 64 KiB for a body
		// of a few bytes, where a claimed length taken on trust costs
		// 1 MiB (a string) or the claim itself (bytes).
		least := uint64(math.MaxUint64)
		for range 5 {
			var m0, m1 runtime.MemStats
			runtime.ReadMemStats(&m0)
			_, err := decodeEvent(3, rec)
			runtime.ReadMemStats(&m1)
			if !errors.Is(err, ErrBadRecord) {
				t.Errorf("%s: err %v, want ErrBadRecord", name, err)
			}
			least = min(least, m1.TotalAlloc-m0.TotalAlloc)
		}
		if least > 64<<10 {
			t.Errorf("%s: decoding %d bytes allocated %d bytes (least of 5)", name, len(body), least)
		}
	}
	reason := []byte{0x99, 1, 0xa0, 0xa0, 0xa0, 0, 1, 0xc0, 0xa0, 0xdb, 0xff, 0xff, 0xff, 0xff, 'r'}
	rec := sealRecord(reason)
	rec[0] = recordVersionReason
	if _, err := decodeEvent(3, rec); !errors.Is(err, ErrBadRecord) {
		t.Errorf("reason str32 4GiB: err %v, want ErrBadRecord", err)
	}
}

// A record with any one bit flipped after its CRC was computed (in the
// CRC or in the body) is refused with ErrBadRecord: CRC-32C detects every
// single-bit error. Raw bytes with a wrong version byte are refused too.
func FuzzDecodeEventChecksum(f *testing.F) {
	for i, e := range fuzzSeedEvents {
		b, err := encodeEvent(&e)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b[5:], uint32(i*13), b[0])
	}
	f.Add([]byte{}, uint32(0), byte(recordVersion))
	f.Add([]byte{0x90}, uint32(3), byte(2))
	f.Add([]byte{0x90}, uint32(3), byte(4)) // no such version
	f.Fuzz(func(t *testing.T, body []byte, bit uint32, version byte) {
		rec := sealRecordVersion(version, body)
		if recordFieldCount(version) != 0 {
			n := uint32(8 * (len(rec) - 1))
			i := 1 + int(bit%n)/8
			rec[i] ^= 1 << (bit % 8)
		}
		if _, err := decodeEvent(7, rec); !errors.Is(err, ErrBadRecord) {
			t.Fatalf("decode of a damaged record (version %d, bit %d) = %v; want ErrBadRecord", version, bit, err)
		}
	})
}

// Decoding any bytes as an index value never panics and returns an entry
// or ErrBadRecord; every encoded (uid, rv, object offset) decodes to
// itself, and a schema 1 value (no tag, no offset) still decodes. The
// index value carries no checksum, so the raw bytes reach the decoder.
func FuzzDecodeIndex(f *testing.F) {
	f.Add([]byte("ns/a"), encodeIndex("uid-1", "12", 7), "uid-1", "12", uint64(7))
	f.Add([]byte("ns/a"), encodeIndexV1("uid-1", "12"), "uid-1", "12", uint64(0))
	f.Add([]byte("k"), []byte{0xff}, "", "", uint64(0))
	f.Add([]byte("k"), []byte{0x80, 0x00}, "", "", uint64(1<<40))
	f.Add([]byte(""), []byte{0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 1}, "u", "W/\"x\"", uint64(0))
	f.Add([]byte("k"), []byte{5, 'a'}, "0123456789abcdef", "", uint64(300))
	f.Add([]byte("ns/b"), encodeIndex("0f1e2d3c-4b5a-6978-8796-a5b4c3d2e1f0", "123456", 1<<20), "0f1e2d3c-4b5a-6978-8796-A5B4C3D2E1F0", "1", uint64(1))
	f.Add([]byte("ns/c"), encodeIndex("0f1e2d3c-4b5a-6978-8796-a5b4c3d2e1f0x", "", 0), "0f1e2d3c_4b5a-6978-8796-a5b4c3d2e1f0", "", uint64(2))
	f.Fuzz(func(t *testing.T, key, b []byte, uid, rv string, object uint64) {
		e, off, err := decodeIndexObject(key, b)
		switch {
		case err != nil && !errors.Is(err, ErrBadRecord):
			t.Fatalf("decode error %v is not ErrBadRecord", err)
		case err == nil && e.Key != string(key):
			t.Fatalf("decoded key %q, want %q", e.Key, key)
		case err == nil && indexObject(b) != off:
			t.Fatalf("indexObject = %d, decode gives %d", indexObject(b), off)
		case err == nil && !bytes.Equal(encodeIndex(e.UID, e.ResourceVersion, off), b):
			// Non-canonical varints and schema 1 values may decode; they
			// must still give a value that round-trips from its own
			// encoding.
			e2, off2, err := decodeIndexObject(key, encodeIndex(e.UID, e.ResourceVersion, off))
			if err != nil || e2 != e || off2 != off {
				t.Fatalf("round trip of %+v, %d failed: %+v, %d, %v", e, off, e2, off2, err)
			}
		}
		want := IndexEntry{Key: string(key), UID: uid, ResourceVersion: rv}
		if got, gotOff, err := decodeIndexObject(key, encodeIndex(uid, rv, object)); err != nil || got != want || gotOff != object {
			t.Fatalf("decode(encode(%q, %q, %d)) = %+v, %d, %v; want %+v", uid, rv, object, got, gotOff, err, want)
		}
		if got, gotOff, err := decodeIndexObject(key, encodeIndexV1(uid, rv)); err != nil || got != want || gotOff != 0 {
			t.Fatalf("decode(schema 1 (%q, %q)) = %+v, %d, %v; want %+v", uid, rv, got, gotOff, err, want)
		}
	})
}

// encodeIndexV1 is the index value schema 1 wrote.
func encodeIndexV1(uid, rv string) []byte {
	b := binary.AppendUvarint(nil, uint64(len(uid)))
	return append(append(b, uid...), rv...)
}
