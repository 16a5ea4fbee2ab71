package journal

import (
	"encoding/binary"
	"fmt"
)

// IndexEntry is what the index keeps for one object.
type IndexEntry struct {
	// Key is <namespace>/<name>, or <name> when cluster-scoped.
	Key string
	// UID is the object's metadata.uid.
	UID string
	// ResourceVersion is the object's last metadata.resourceVersion seen.
	ResourceVersion string
}

// The index value, schema 2: the tag 0x80 0x00, the uvarint offset of the
// key's last event that carried an object (0: none), the UID, then the RV.
// The UID is the uvarint 2×length+1 and 16 bytes when it is a UUID in
// canonical lowercase form (as the apiserver makes them), else the uvarint
// 2×length and the UID as it is. About 2 + 4 + 1 + 16 + len(RV) bytes, 14
// fewer than schema 1 for a 36-character UID, so that the offset costs
// the index nothing and an entry with its key stays well under 200 bytes
// on disk.
//
// Schema 1 wrote the value without tag and offset; such values are still
// read (an old file's entries until their key changes). The tag tells them
// apart: a schema 1 value starts with the canonical uvarint that
// binary.AppendUvarint writes, and 0x80 0x00 is never canonical (an
// over-long zero).
var indexTag = [2]byte{0x80, 0x00}

func encodeIndex(uid, rv string, object uint64) []byte {
	b := make([]byte, 0, 2+2*binary.MaxVarintLen64+len(uid)+len(rv))
	b = append(b, indexTag[:]...)
	b = binary.AppendUvarint(b, object)
	if isUUID(uid) {
		b = binary.AppendUvarint(b, 2*16+1)
		b = appendUUID(b, uid)
	} else {
		b = binary.AppendUvarint(b, 2*uint64(len(uid)))
		b = append(b, uid...)
	}
	return append(b, rv...)
}

func decodeIndex(key, v []byte) (IndexEntry, error) {
	e, _, err := decodeIndexObject(key, v)
	return e, err
}

// decodeIndexObject decodes an index value and the offset of the key's
// last event with an object (0: none known, always for a schema 1 value).
// A panic of the decoder is an error matching ErrBadRecord (decodePanic).
func decodeIndexObject(key, v []byte) (_ IndexEntry, _ uint64, err error) {
	defer decodePanic(&err, 0, key)
	if len(v) < 2 || v[0] != indexTag[0] || v[1] != indexTag[1] {
		return decodeIndexV1(key, v)
	}
	bad := func() (IndexEntry, uint64, error) {
		return IndexEntry{}, 0, fmt.Errorf("%w: index entry %q", ErrBadRecord, key)
	}
	object, w := binary.Uvarint(v[2:])
	if w <= 0 {
		return bad()
	}
	v = v[2+w:]
	n, w := binary.Uvarint(v)
	if w <= 0 || n/2 > uint64(len(v)-w) || (n&1 == 1 && n != 2*16+1) {
		return bad()
	}
	v = v[w:]
	var uid string
	if n&1 == 1 {
		uid = formatUUID(v[:16])
	} else {
		uid = string(v[:n/2])
	}
	return IndexEntry{Key: string(key), UID: uid, ResourceVersion: string(v[n/2:])}, object, nil
}

// decodeIndexV1 decodes a schema 1 value: the uvarint length of the UID,
// the UID, then the RV.
func decodeIndexV1(key, v []byte) (IndexEntry, uint64, error) {
	n, w := binary.Uvarint(v)
	if w <= 0 || uint64(len(v)-w) < n {
		return IndexEntry{}, 0, fmt.Errorf("%w: index entry %q", ErrBadRecord, key)
	}
	return IndexEntry{Key: string(key), UID: string(v[w : w+int(n)]), ResourceVersion: string(v[w+int(n):])}, 0, nil
}

// indexObject returns the offset of the key's last event with an object
// from an index value without decoding the rest (0: none known, or a bad
// value: the caller falls back to the objects bucket).
func indexObject(v []byte) uint64 {
	if len(v) < 3 || v[0] != indexTag[0] || v[1] != indexTag[1] {
		return 0
	}
	n, w := binary.Uvarint(v[2:])
	if w <= 0 {
		return 0
	}
	return n
}

// isUUID reports whether s is a UUID in canonical lowercase form
// (8-4-4-4-12 hexadecimal digits), the form that round-trips through 16
// bytes exactly.
func isUUID(s string) bool {
	if len(s) != 36 {
		return false
	}
	for i := 0; i < 36; i++ {
		c := s[i]
		switch i {
		case 8, 13, 18, 23:
			if c != '-' {
				return false
			}
		default:
			if !('0' <= c && c <= '9' || 'a' <= c && c <= 'f') {
				return false
			}
		}
	}
	return true
}

// appendUUID appends the 16 bytes of s, a UUID that isUUID accepts.
func appendUUID(b []byte, s string) []byte {
	var out [16]byte
	j := 0
	for i := 0; i < len(s); i++ {
		if s[i] == '-' {
			continue
		}
		out[j/2] |= unhex(s[i]) << (4 * (1 - j%2))
		j++
	}
	return append(b, out[:]...)
}

func unhex(c byte) byte {
	if c <= '9' {
		return c - '0'
	}
	return c - 'a' + 10
}

func formatUUID(u []byte) string {
	const digits = "0123456789abcdef"
	var b [36]byte
	j := 0
	for i, c := range u {
		if i == 4 || i == 6 || i == 8 || i == 10 {
			b[j] = '-'
			j++
		}
		b[j], b[j+1] = digits[c>>4], digits[c&0x0f]
		j += 2
	}
	return string(b[:])
}
