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
// key's last event that carried an object (0: none), the uvarint length of
// the UID, the UID, then the RV. About 2 + 3 + 36 + 1 + len(RV) bytes, so
// an entry with its key stays well under 200 bytes on disk.
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
	b = binary.AppendUvarint(b, uint64(len(uid)))
	b = append(b, uid...)
	return append(b, rv...)
}

func decodeIndex(key, v []byte) (IndexEntry, error) {
	e, _, err := decodeIndexObject(key, v)
	return e, err
}

// decodeIndexObject decodes an index value and the offset of the key's
// last event with an object (0: none known, always for a schema 1 value).
func decodeIndexObject(key, v []byte) (IndexEntry, uint64, error) {
	var object uint64
	if len(v) >= 2 && v[0] == indexTag[0] && v[1] == indexTag[1] {
		n, w := binary.Uvarint(v[2:])
		if w <= 0 {
			return IndexEntry{}, 0, fmt.Errorf("%w: index entry %q", ErrBadRecord, key)
		}
		object, v = n, v[2+w:]
	}
	n, w := binary.Uvarint(v)
	if w <= 0 || uint64(len(v)-w) < n {
		return IndexEntry{}, 0, fmt.Errorf("%w: index entry %q", ErrBadRecord, key)
	}
	return IndexEntry{Key: string(key), UID: string(v[w : w+int(n)]), ResourceVersion: string(v[w+int(n):])}, object, nil
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
