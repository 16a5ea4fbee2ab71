package journal

import (
	"bytes"
	"errors"
	"strings"
	"testing"
	"time"
)

// Ensure that recordObject finds the key and the object of every encoded
// record, whatever the sizes of its fields (msgpack's fix, 8-, 16- and
// 32-bit lengths) and its time (negative, zero, large), the same as
// decodeEvent; and that a damaged record is ErrBadRecord.
func TestRecordObject_SameAsDecodeEvent(t *testing.T) {
	sizes := []int{0, 1, 31, 32, 255, 256, 65535, 65536, 70000}
	times := []time.Time{time.Unix(0, 0), time.Unix(0, -1), time.Date(1200, 1, 1, 0, 0, 0, 0, time.UTC), time.Date(2026, 12, 1, 3, 0, 0, 5, time.UTC)}
	for _, ks := range sizes[1:6] {
		for _, os := range sizes {
			for ti, tm := range times {
				e := Event{Type: Modified, Key: strings.Repeat("k", ks), UID: strings.Repeat("u", os%300), ResourceVersion: strings.Repeat("9", ti*40),
					Time: tm, Origin: OriginRelist, PrevResourceVersion: strings.Repeat("8", os%70)}
				if os > 0 {
					e.Object = bytes.Repeat([]byte{'{'}, os)
				}
				rec, err := encodeEvent(&e)
				if err != nil {
					t.Fatal(err)
				}
				want, err := decodeEvent(1, rec)
				if err != nil {
					t.Fatal(err)
				}
				key, obj, err := recordObject(1, rec)
				if err != nil || string(key) != want.Key || !bytes.Equal(obj, want.Object) || (obj == nil) != (want.Object == nil) {
					t.Fatalf("key %d, object %d, time %v: recordObject = %d-byte key, %d-byte object (nil %v), %v; want %d, %d (nil %v)",
						ks, os, tm, len(key), len(obj), obj == nil, err, len(want.Key), len(want.Object), want.Object == nil)
				}
				for _, cut := range []int{0, 5, 6, len(rec) / 2, len(rec) - 1} {
					if _, _, err := recordObject(1, rec[:cut]); !errors.Is(err, ErrBadRecord) {
						t.Fatalf("recordObject of a record cut to %d of %d bytes = %v; want ErrBadRecord", cut, len(rec), err)
					}
				}
			}
		}
	}
}
