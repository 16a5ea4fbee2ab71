package journal

import (
	"bytes"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/watchjournal/watchjournal/internal/storage"
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
				if ti%2 == 1 {
					e.Reason = ReasonMoved // a version 2 record (event.go)
				}
				if ti >= 2 {
					e.PrevOffset = uint64(1) << (8 * ti) // a version 3 record, with and without a Reason
				}
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

// Decoding any record body (with a valid checksum) as a record never
// panics: recordObject returns slices of the body or ErrBadRecord.
func FuzzRecordObject(f *testing.F) {
	addSeedBodies(f)
	f.Add([]byte{0x98, 0xc0, 0xdb, 0xff, 0xff, 0xff, 0xff})
	f.Fuzz(func(t *testing.T, body []byte) {
		for _, v := range []byte{recordVersion, recordVersionReason, recordVersionPrev, recordVersion | sealedRecord, recordVersionPrev | sealedRecord} {
			rec := sealRecordVersion(v, body)
			key, obj, err := recordObject(3, rec)
			if err != nil && !errors.Is(err, ErrBadRecord) {
				t.Fatalf("version %d: error %v is not ErrBadRecord", v, err)
			}
			if err == nil {
				if e, derr := decodeEvent(3, rec); derr == nil && (e.Key != string(key) || !bytes.Equal(e.Object, obj)) {
					t.Fatalf("version %d: recordObject = %q, %q; decodeEvent = %q, %q", v, key, obj, e.Key, e.Object)
				}
			}
		}
	})
}

// Ensure that an index entry pointing at another key's record is reported
// by the file check and read as ErrBadRecord, never served as the key's
// object.
func TestObjects_EntryPointingAtAnotherKey(t *testing.T) {
	j, err := Open(t.TempDir()+"/j.db", &Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	defer j.Close()
	if err := j.Settings().KeepObjects(); err != nil {
		t.Fatal(err)
	}
	err = j.Writer().Update(func(tx *Tx) error {
		for _, k := range []string{"ns/a", "ns/b"} {
			if _, err := tx.Append(&Event{Type: Added, Key: k, UID: "u-" + k, ResourceVersion: "1", Origin: OriginWatch, Object: []byte(`{"k":"` + k + `"}`)}); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if rep, err := j.Check(); err != nil || !rep.OK() {
		t.Fatalf("Check = %+v, %v; want no problems", rep, err)
	}
	// a's entry now points at b's record (offset 2).
	if err := j.store.Update(func(tx storage.Tx) error { return tx.IndexPut([]byte("ns/a"), encodeIndex("u-ns/a", "1", 2)) }); err != nil {
		t.Fatal(err)
	}
	if _, _, ok, err := j.Object("ns/a"); ok || !errors.Is(err, ErrBadRecord) {
		t.Fatalf("Object(ns/a) = ok %v, %v; want ErrBadRecord", ok, err)
	}
	rep, err := j.Check()
	if err != nil || rep.OK() || !strings.Contains(strings.Join(rep.Problems, "\n"), `"ns/a" points at offset 2`) {
		t.Fatalf("Check = %+v, %v; want a problem naming ns/a", rep, err)
	}
}

// A panic of a decoder of stored bytes stops the read with an error
// matching ErrBadRecord that names the record, not the process, and is not
// ErrCorrupt (the store's pages were read).
func TestDecodePanic_IsBadRecord(t *testing.T) {
	decode := func(off uint64, key []byte) (err error) {
		defer decodePanic(&err, off, key)
		var b []byte
		_ = b[off] // a decoder's bug: an index out of range
		return nil
	}
	for _, c := range []struct {
		key  []byte
		want string
	}{{nil, "offset 7"}, {[]byte("ns/a"), `index entry "ns/a"`}} {
		err := decode(7, c.key)
		if !errors.Is(err, ErrBadRecord) || errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("decoder panic = %v; want ErrBadRecord naming %s, not ErrCorrupt", err, c.want)
		}
	}
}
