package journal

import (
	"bytes"
	"testing"
	"time"
)

// Decoding any bytes as a record returns an event or ErrBadRecord, never
// panics; a record that decodes re-encodes to an equal event.
func FuzzDecodeEvent(f *testing.F) {
	for _, e := range []Event{
		{Type: Added, Key: "ns/a", UID: "u", ResourceVersion: "1", Origin: OriginWatch, Object: []byte(`{}`), Time: time.Unix(0, 5)},
		{Type: Deleted, Key: "a", UID: "u", ResourceVersion: "W/x", Origin: OriginRestart},
		{Type: Modified, Key: "ns/b", UID: "u2", ResourceVersion: "9007199254740993", PrevResourceVersion: "7", Origin: OriginRelist},
	} {
		b, err := encodeEvent(&e)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Add([]byte{})
	f.Add([]byte{1})
	f.Add([]byte{2, 0x90})
	f.Fuzz(func(t *testing.T, b []byte) {
		e, err := decodeEvent(7, b)
		if err != nil {
			return
		}
		b2, err := encodeEvent(&e)
		if err != nil {
			t.Fatalf("decoded %+v does not encode: %v", e, err)
		}
		e2, err := decodeEvent(7, b2)
		if err != nil {
			t.Fatalf("re-encoded record does not decode: %v", err)
		}
		if e2.Type != e.Type || e2.Key != e.Key || e2.UID != e.UID || e2.ResourceVersion != e.ResourceVersion ||
			e2.Origin != e.Origin || !bytes.Equal(e2.Object, e.Object) || !e2.Time.Equal(e.Time) || e2.PrevResourceVersion != e.PrevResourceVersion {
			t.Fatalf("round trip: %+v != %+v", e2, e)
		}
	})
}

// Decoding any bytes as an index value never panics.
func FuzzDecodeIndex(f *testing.F) {
	f.Add(encodeIndex("uid-1", "12"))
	f.Add([]byte{0xff})
	f.Fuzz(func(t *testing.T, b []byte) {
		e, err := decodeIndex([]byte("k"), b)
		if err == nil && !bytes.Equal(encodeIndex(e.UID, e.ResourceVersion), b) {
			// Non-canonical varints may decode; they must still give a
			// value that round-trips from its own encoding.
			e2, err := decodeIndex([]byte("k"), encodeIndex(e.UID, e.ResourceVersion))
			if err != nil || e2 != e {
				t.Fatalf("round trip of %+v failed: %+v, %v", e, e2, err)
			}
		}
	})
}
