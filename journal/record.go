package journal

// A record's object without decoding the record: Get and List read the
// object of a key's last full event straight from the journal record in
// bbolt's memory-mapped page (objects.go). The record is checked (version
// byte, CRC-32C) and its msgpack array walked field by field to the Object
// field, whose bytes are returned as a slice of the record: no copy, no
// allocation.

import (
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"runtime"
)

// The positions of the fields recordObject reads in the msgpack array of
// record (event.go). Later record versions (recordReason, recordPrev)
// only append fields, so these positions hold in every version.
const (
	fieldKey    = 1
	fieldObject = 6
)

// recordObject returns the key and the object of the encoded record rec at
// off, both slices of rec; obj is nil for an event without an object. A
// record that is damaged or not in the form encodeEvent writes is an error
// matching ErrBadRecord, and so is a panic of the walk (decodePanic).
func recordObject(off uint64, rec []byte) (key, obj []byte, err error) {
	defer decodePanic(&err, off, nil)
	if len(rec) < 6 || recordFieldCount(rec[0]) == 0 {
		return nil, nil, fmt.Errorf("%w: offset %d: unknown record version", ErrBadRecord, off)
	}
	body := rec[5:]
	if crc32.Checksum(body, castagnoli) != binary.BigEndian.Uint32(rec[1:5]) {
		return nil, nil, fmt.Errorf("%w: offset %d: checksum mismatch", ErrBadRecord, off)
	}
	want := recordFieldCount(rec[0])
	n, p, ok := mpArrayLen(body)
	if !ok || n != want {
		return nil, nil, fmt.Errorf("%w: offset %d: not a record array", ErrBadRecord, off)
	}
	for i := 0; i <= fieldObject; i++ {
		v, next, ok := mpNext(body, p)
		if !ok {
			return nil, nil, fmt.Errorf("%w: offset %d: field %d", ErrBadRecord, off, i)
		}
		switch i {
		case fieldKey:
			key = v
		case fieldObject:
			obj = v
		}
		p = next
	}
	if len(obj) == 0 {
		obj = nil
	}
	if (rec[0]&sealedRecord != 0) != isSealed(obj) {
		return nil, nil, fmt.Errorf("%w: offset %d: sealed mark and object disagree", ErrBadRecord, off)
	}
	return key, obj, nil
}

// mpArrayLen reads a msgpack array header at the start of b.
func mpArrayLen(b []byte) (n, next int, ok bool) {
	if len(b) == 0 {
		return 0, 0, false
	}
	switch c := b[0]; {
	case c >= 0x90 && c <= 0x9f:
		return int(c & 0x0f), 1, true
	case c == 0xdc && len(b) >= 3:
		return int(binary.BigEndian.Uint16(b[1:])), 3, true
	case c == 0xdd && len(b) >= 5:
		return int(binary.BigEndian.Uint32(b[1:])), 5, true
	}
	return 0, 0, false
}

// mpNext reads the msgpack value at b[p:] of the kinds a record holds
// (nil, booleans, integers, floats, strings, binary) and returns the
// payload of a string or binary value (nil for the others) and the
// position after the value.
func mpNext(b []byte, p int) (payload []byte, next int, ok bool) {
	if p >= len(b) {
		return nil, 0, false
	}
	c := b[p]
	fixed := func(n int) ([]byte, int, bool) {
		if p+1+n > len(b) {
			return nil, 0, false
		}
		return nil, p + 1 + n, true
	}
	sized := func(hdr int) ([]byte, int, bool) {
		if p+1+hdr > len(b) {
			return nil, 0, false
		}
		var n uint64
		switch hdr {
		case 1:
			n = uint64(b[p+1])
		case 2:
			n = uint64(binary.BigEndian.Uint16(b[p+1:]))
		case 4:
			n = uint64(binary.BigEndian.Uint32(b[p+1:]))
		}
		start := p + 1 + hdr
		if n > uint64(len(b)-start) {
			return nil, 0, false
		}
		end := start + int(n)
		return b[start:end:end], end, true
	}
	switch {
	case c <= 0x7f, c >= 0xe0, c == 0xc0, c == 0xc2, c == 0xc3: // fixints, nil, bool
		return nil, p + 1, true
	case c >= 0xa0 && c <= 0xbf: // fixstr
		n := int(c & 0x1f)
		if p+1+n > len(b) {
			return nil, 0, false
		}
		return b[p+1 : p+1+n : p+1+n], p + 1 + n, true
	case c == 0xcc || c == 0xd0: // uint8, int8
		return fixed(1)
	case c == 0xcd || c == 0xd1: // uint16, int16
		return fixed(2)
	case c == 0xce || c == 0xd2 || c == 0xca: // uint32, int32, float32
		return fixed(4)
	case c == 0xcf || c == 0xd3 || c == 0xcb: // uint64, int64, float64
		return fixed(8)
	case c == 0xd9 || c == 0xc4: // str8, bin8
		return sized(1)
	case c == 0xda || c == 0xc5: // str16, bin16
		return sized(2)
	case c == 0xdb || c == 0xc6: // str32, bin32
		return sized(4)
	}
	return nil, 0, false
}

// decodePanic, deferred by the decoders of stored bytes (decodeEvent,
// decodeIndexObject, recordObject), turns a panic of theirs into an error
// matching ErrBadRecord that names the record (the index entry key, or
// the offset off when key is nil). The bytes come from the file: the
// decoders are fuzzed not to panic on any input (fuzz_test.go), so a panic
// is a decoder's bug, and a bug that stops a read with an error, not the
// process. It is not ErrCorrupt: the store's pages were read. A memory
// fault goes on: reading the file's memory map faults when the file is
// shorter than the map, and the store returns that as ErrCorrupt
// (internal/storage, "Panics").
func decodePanic(err *error, off uint64, key []byte) {
	r := recover()
	if r == nil {
		return
	}
	if f, ok := r.(runtime.Error); ok {
		if _, ok := f.(interface{ Addr() uintptr }); ok {
			panic(r)
		}
	}
	if key != nil {
		*err = fmt.Errorf("%w: index entry %q: decoding panicked: %v", ErrBadRecord, key, r)
		return
	}
	*err = fmt.Errorf("%w: offset %d: decoding panicked: %v", ErrBadRecord, off, r)
}
