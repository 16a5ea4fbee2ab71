package journal

import (
	"encoding/binary"
	"fmt"
	"strings"

	"github.com/google/uuid"
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
	if u, ok := canonicalUUID(uid); ok {
		b = binary.AppendUvarint(b, 2*16+1)
		b = append(b, u[:]...)
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
		uid = uuid.UUID(v[:16]).String()
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

// canonicalUUID returns the 16 bytes of s when s is a UUID in canonical
// lowercase form (8-4-4-4-12 hexadecimal digits), the form that
// round-trips through them exactly.
func canonicalUUID(s string) (uuid.UUID, bool) {
	if len(s) != 36 || strings.ToLower(s) != s {
		return uuid.UUID{}, false
	}
	u, err := uuid.Parse(s)
	return u, err == nil
}
