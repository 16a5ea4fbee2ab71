package journal

// What a sealed file records: the resource it seals, and the key its
// index values are hashed under.
//
// Sealing once means sealing always. A writable Open of a file whose
// resource is sealed (Settings.Seals) records the resource in the meta
// entry "sealed". A later writable Open that would not seal it (no
// Keyring, or a SealResources without the resource) fails with a
// *SealingError naming the option to set: the writer would append its
// objects in plaintext beside sealed ones, and a reader of the file could
// no longer tell that its plaintext is all there is. Read-only opens are
// not refused: they write nothing. The entry is removed only with the
// file (start it afresh).
//
// Index values are not stored in plaintext in a sealed file. An index
// over a Secret's data (indexes.go) would otherwise put that data in the
// file beside its sealed object. So in a file that seals, every index
// value is stored as its HMAC-SHA256 (32 bytes) under a key derived from
// the primary sealing key (deriveIndexKey: an HMAC of the sealing key, so
// the index key reveals nothing of the sealing key), and a lookup hashes
// the value it is asked for the same way. The meta entry "indexKey"
// records the ID (KeyID) of the sealing key the index key derives from. A
// writable Open whose primary key is another (a rotation, or a file sealed
// before its values were hashed) drops every index the file records, in
// the same transaction that records the new ID: the processes's
// Indexes.Add builds them again (a name not recorded starts empty, and
// its reindex computes every key's values). A lookup in a transaction
// whose "indexKey" is not the one the journal was opened with, or by a
// journal whose keyring lacks that key, fails with ErrIndexPending (which
// matches ErrNoIndex): the reader evaluates the function itself. Hashed
// values cannot be listed back (Indexes.Values fails the same way).
//
// A full 32-byte HMAC makes two values with one stored form a collision
// of HMAC-SHA256: a lookup's keys are the keys holding the value. Readers
// that want to re-check anyway (jcache does) can: the objects are there.

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"

	"github.com/watchjournal/watchjournal/internal/storage"
)

// Meta keys of sealed files.
const (
	// metaSealed is the GroupResource (schema.GroupResource.String) whose
	// objects the file seals.
	metaSealed = "sealed"
	// metaIndexKey is the ID (KeyID) of the sealing key whose derived key
	// hashes the file's index values.
	metaIndexKey = "indexKey"
)

// ErrSealingDropped matches a *SealingError.
var ErrSealingDropped = errors.New("journal: the file seals its objects and this writer would not")

// SealingError is returned by a writable Open of a file that records its
// resource as sealed when the options would not seal it: no Keyring, or a
// SealResources that no longer holds the resource. Nothing was written.
// It matches ErrSealingDropped with errors.Is.
type SealingError struct {
	// Path is the journal file.
	Path string
	// Resource is the resource the file seals (schema.GroupResource's
	// String: "secrets", "widgets.example.com").
	Resource string
	// Option is the option that would seal it again:
	// "Options.Keyring" or "Options.SealResources".
	Option string
}

// Error returns the message, naming the file, its resource and the option.
func (e *SealingError) Error() string {
	return fmt.Sprintf("journal: %s seals the objects of %s; a writer without %s would append them in plaintext: "+
		"open it with %s holding %s, or remove the file to start it afresh", e.Path, e.Resource, e.Option, e.Option, e.Resource)
}

// Is reports whether target is ErrSealingDropped.
func (e *SealingError) Is(target error) bool { return target == ErrSealingDropped }

// deriveIndexKey returns the HMAC-SHA256 key of index values sealed under
// key.
func deriveIndexKey(key []byte) []byte {
	m := hmac.New(sha256.New, key)
	m.Write([]byte("watchjournal index values v1"))
	return m.Sum(nil)
}

// indexHash is how a journal stores and looks up index values, fixed at
// Open: in plaintext (zero), or hashed under key, derived from the sealing
// key of ID id; key is nil when the keyring lacks it.
type indexHash struct {
	hashed bool
	id     string
	key    []byte
}

// recordSealing checks and records, for a writable Open, what the file
// seals (see above).
func (j *Journal) recordSealing() error {
	s := j.seal
	var sealed, indexKey string
	err := j.store.View(func(tx storage.Tx) error {
		sealed, indexKey = string(tx.Meta(metaSealed)), string(tx.Meta(metaIndexKey))
		return nil
	})
	if err != nil {
		return err
	}
	if !s.active() {
		if sealed != "" {
			opt := "Options.SealResources"
			if s.ring == nil {
				opt = "Options.Keyring"
			}
			return &SealingError{Path: j.Path(), Resource: sealed, Option: opt}
		}
		s.readIndexHash(indexKey)
		return nil
	}
	primary := &s.ring.keys[0]
	id := hex.EncodeToString(primary.id[:])
	s.index = indexHash{hashed: true, id: id, key: primary.index}
	if sealed != "" && indexKey == id {
		return nil
	}
	return j.store.Update(func(tx storage.Tx) error {
		if err := tx.SetMeta(metaSealed, []byte(s.gr.String())); err != nil {
			return err
		}
		if string(tx.Meta(metaIndexKey)) == id {
			return nil
		}
		// Entries hashed under another key (or none) match no lookup:
		// drop them; Indexes.Add builds them again.
		for _, n := range recordedIndexes(tx) {
			if err := tx.DropDerived(indexBucket(n)); err != nil {
				return err
			}
		}
		if err := setRecordedIndexes(tx, nil); err != nil {
			return err
		}
		if err := setPendingIndexes(tx, nil); err != nil {
			return err
		}
		return tx.SetMeta(metaIndexKey, []byte(id))
	})
}

// readIndexHash sets s.index from the file's "indexKey" entry, for a
// journal that does not seal (a reader).
func (s *sealer) readIndexHash(id string) {
	if id == "" {
		return
	}
	s.index = indexHash{hashed: true, id: id}
	raw, err := hex.DecodeString(id)
	if err != nil || len(raw) != sealIDSize {
		return // a lookup fails: no key
	}
	if k := s.ring.find([sealIDSize]byte(raw)); k != nil {
		s.index.key = k.index
	}
}

// initIndexHash sets a read-only journal's index hashing from the file.
func (j *Journal) initIndexHash() error {
	var id string
	if err := j.store.View(func(tx storage.Tx) error { id = string(tx.Meta(metaIndexKey)); return nil }); err != nil {
		return err
	}
	j.seal.readIndexHash(id)
	return nil
}

// hashValues returns vals as the file stores them: hashed (sorted,
// distinct) when its index values are, vals otherwise.
func (s *sealer) hashValues(vals []string) ([]string, error) {
	if s == nil || !s.index.hashed || len(vals) == 0 {
		return vals, nil
	}
	if s.index.key == nil {
		return nil, fmt.Errorf("%w: index values are hashed under key %s, which this journal does not hold", ErrIndexPending, s.index.id)
	}
	out := make([]string, len(vals))
	for i, v := range vals {
		m := hmac.New(sha256.New, s.index.key)
		m.Write([]byte(v))
		out[i] = string(m.Sum(nil))
	}
	slices.Sort(out)
	return slices.Compact(out), nil
}

// lookupValue returns the stored form of value in tx's file, or
// ErrIndexPending when the journal cannot compute it: its values are
// hashed under a key this journal lacks, or not under the one the journal
// was opened with (a writer has rotated it since).
func (s *sealer) lookupValue(tx storage.Tx, value string) (string, error) {
	recorded := string(tx.Meta(metaIndexKey))
	var have indexHash
	if s != nil {
		have = s.index
	}
	if recorded != have.id {
		return "", fmt.Errorf("%w: index values are hashed under key %q, this journal opened the file under %q", ErrIndexPending, recorded, have.id)
	}
	vals, err := s.hashValues([]string{value})
	if err != nil {
		return "", err
	}
	return vals[0], nil
}

// Hashed reports whether the file's index values are stored as
// keyed hashes (a sealed file): Indexes.Values cannot list them, and a lookup
// needs the sealing key they derive from.
func (in Indexes) Hashed() bool { return in.j.seal != nil && in.j.seal.index.hashed }
