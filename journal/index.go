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

// The index value: uvarint length of the UID, the UID, then the RV. About
// 36 + 1 + len(RV) bytes, so an entry with its key stays well under 200
// bytes on disk.
func encodeIndex(uid, rv string) []byte {
	b := make([]byte, 0, binary.MaxVarintLen64+len(uid)+len(rv))
	b = binary.AppendUvarint(b, uint64(len(uid)))
	b = append(b, uid...)
	return append(b, rv...)
}

func decodeIndex(key, v []byte) (IndexEntry, error) {
	n, w := binary.Uvarint(v)
	if w <= 0 || uint64(len(v)-w) < n {
		return IndexEntry{}, fmt.Errorf("%w: index entry %q", ErrBadRecord, key)
	}
	return IndexEntry{Key: string(key), UID: string(v[w : w+int(n)]), ResourceVersion: string(v[w+int(n):])}, nil
}
