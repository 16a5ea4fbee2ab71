package journal

// Sealing: the objects of sensitive resources are stored encrypted.
//
// Why. A Secret volume lives in the kubelet's tmpfs; a journal that keeps
// Secrets' data in a file on disk must not be the weaker link. So the
// object of every event of a sensitive resource (Secrets, and whatever
// Options.SealResources adds) is sealed with AES-256-GCM (crypto/aes,
// crypto/cipher) under a key the user supplies (Keyring, LoadKeyring: a
// file of 32 raw bytes or their base64, as a mounted Secret holds it).
// Only the Object is sealed (in the journal records, the objects bucket
// and the relist's stage file alike): the key, UID, resourceVersions, offsets,
// times and the index stay readable without the key, because they are
// not secret and every file check, retention trimming, relist diff and
// Snapshot works on them. Secondary index values (indexes.go) may be
// secret: they are stored as keyed hashes (sealfile.go), as is the record
// of what the file seals.
//
// The sealed form (an envelope) replaces the Object bytes in the record:
//
//	"\x00wjs" | 1 (envelope version) | key ID (8 bytes) | nonce (12 bytes) | ciphertext and GCM tag
//
// The key ID is the first 8 bytes of the key's SHA-256 (KeyID): it names
// the key without revealing it. The nonce is random (crypto/rand), one per
// sealing; at 2^32 sealings per key the chance of a repeated nonce is
// about 2^-33, and rotation (below) bounds how long one key lives. The
// additional data binds the ciphertext to the key ID, to the file's
// GroupResource and to the object's key (<namespace>/<name>), so a
// sealed object copied into another key's record, another resource's
// file or relabelled with another key ID does not open (ErrBadRecord).
// It does not bind the offset: retention trimming copies a key's latest
// object into the objects bucket, and a relist moves staged records into
// the journal at new offsets, both without opening them.
//
// Marking. A record whose Object is an envelope has the sealedRecord bit
// (0x80) set in its version byte (event.go), so a build without sealing
// refuses it as a record of unknown version (ErrBadRecord) rather than
// handing ciphertext on as JSON; files without sealed records are
// unchanged, byte for byte, and no schema bump is needed to read them.
// Copies in the objects bucket are recognised by the envelope's magic,
// which no JSON object starts with.
//
// Reading. Journal.Read, Consumer reads, ObjectView.Get and Scan and
// Journal.Object open envelopes with the keyring the journal was opened
// with (Options.Keyring); a key ID the keyring lacks is a *SealedError
// (ErrSealed) naming the ID; a journal opened without a keyring reads
// every unsealed object.
//
// Rotation. A Keyring holds several keys; the first (the primary) seals
// every new object, and any key opens what it sealed. To rotate:
//
//  1. put the new key first and keep the old one after it (a Secret
//     holding both, e.g. one base64 key a line, the new one first), and
//     restart the writer and the readers with it;
//  2. wait until the file holds nothing sealed under the old key
//     (Settings.SealKeyUse): new events are sealed under the new key, and
//     retention trimming, when it copies a key's latest object into the
//     objects bucket (KeepObjects), seals it again under the primary; so
//     once retention has trimmed every record written before step 1, only
//     the new key is in use. A file without retention keeps its old
//     records: start it afresh instead (remove the file; the writer lists
//     into a new one, under the new key);
//  3. remove the old key.
//
// A reader without a key the file still uses gets a *SealedError naming
// it. A file rewrite (compactor) copies records as they are: it neither
// opens nor re-seals them.

import (
	"bytes"
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/watchjournal/watchjournal/internal/storage"
)

// KeySize is the size of a sealing key in bytes: AES-256.
const KeySize = 32

// sealMagic starts every envelope: a NUL, which no JSON text starts with,
// then "wjs".
var sealMagic = []byte("\x00wjs")

const (
	sealEnvelopeVersion = 1
	sealIDSize          = 8
	sealNonceSize       = 12
	sealHeader          = 4 + 1 + sealIDSize + sealNonceSize
	// sealedRecord is the bit of a record's version byte that says its
	// Object is an envelope.
	sealedRecord = 0x80
)

// DefaultSealResources are the resources whose objects are always sealed
// when the journal has a keyring: core/v1 Secrets.
var DefaultSealResources = []schema.GroupResource{{Group: "", Resource: "secrets"}}

// ErrSealed matches a *SealedError: an object is sealed under a key the
// journal's keyring does not hold.
var ErrSealed = errors.New("journal: object is sealed under a key this journal does not hold")

// SealedError is a read of an object sealed under a key the journal was
// not given. It matches ErrSealed with errors.Is.
type SealedError struct {
	// KeyID is the ID (KeyID) of the key the object is sealed under.
	KeyID string
	// Key is the object's key (<namespace>/<name>).
	Key string
	// Have lists the IDs of the keys the journal holds, primary first;
	// empty when it was opened without a keyring.
	Have []string
}

// Error returns the message, with the missing key's ID and how to supply it.
func (e *SealedError) Error() string {
	have := "no keyring"
	if len(e.Have) > 0 {
		have = "keys " + strings.Join(e.Have, ", ")
	}
	return fmt.Sprintf("journal: the object of %q is sealed under key %s, which this journal does not hold (it has %s): "+
		"open the file with journal.Options.Keyring holding that key (journalctl --seal-key-file FILE)", e.Key, e.KeyID, have)
}

// Is reports whether target is ErrSealed.
func (e *SealedError) Is(target error) bool { return target == ErrSealed }

// KeyID returns the ID of a sealing key: the hex of the first 8 bytes of
// its SHA-256, 16 characters.
func KeyID(key []byte) string {
	sum := sha256.Sum256(key)
	return hex.EncodeToString(sum[:sealIDSize])
}

type sealKey struct {
	id   [sealIDSize]byte
	aead cipher.AEAD
	// index is the HMAC-SHA256 key of index values (sealfile.go),
	// derived from the sealing key.
	index []byte
}

// Keyring holds the keys a journal seals and opens objects with. The
// first key is the primary: it seals every new object; every key opens
// the objects sealed under it. A Keyring is immutable and safe for
// concurrent use.
type Keyring struct{ keys []sealKey }

// NewKeyring returns a keyring of keys, the primary first. Each key is
// KeySize (32) raw bytes; a duplicate or a key of another size is an
// error.
func NewKeyring(keys ...[]byte) (*Keyring, error) {
	if len(keys) == 0 {
		return nil, errors.New("journal: keyring: no key")
	}
	k := &Keyring{}
	for i, key := range keys {
		if len(key) != KeySize {
			return nil, fmt.Errorf("journal: keyring: key %d has %d bytes, want %d", i, len(key), KeySize)
		}
		block, err := aes.NewCipher(key)
		if err != nil {
			return nil, fmt.Errorf("journal: keyring: %w", err)
		}
		aead, err := cipher.NewGCM(block)
		if err != nil {
			return nil, fmt.Errorf("journal: keyring: %w", err)
		}
		sum := sha256.Sum256(key)
		sk := sealKey{id: [sealIDSize]byte(sum[:sealIDSize]), aead: aead, index: deriveIndexKey(key)}
		if k.find(sk.id) != nil {
			return nil, fmt.Errorf("journal: keyring: key %d (%s) is listed twice", i, hex.EncodeToString(sk.id[:]))
		}
		k.keys = append(k.keys, sk)
	}
	return k, nil
}

// ParseKeys reads keys from the contents of a key file: exactly 32 bytes
// are one raw key; otherwise each non-empty line (surrounding white space
// ignored) is the standard or URL base64 of one key, padded or not, as a
// Secret's data holds it when mounted, or as `head -c 32 /dev/urandom |
// base64` prints it. Several lines are a keyring, the primary first.
func ParseKeys(b []byte) ([][]byte, error) {
	if len(b) == KeySize {
		return [][]byte{bytes.Clone(b)}, nil
	}
	var keys [][]byte
	for i, line := range strings.Split(string(b), "\n") {
		line = strings.TrimSpace(line)
		if line == "" {
			continue
		}
		var key []byte
		var err error
		for _, enc := range []*base64.Encoding{base64.StdEncoding, base64.RawStdEncoding, base64.URLEncoding, base64.RawURLEncoding} {
			if key, err = enc.DecodeString(line); err == nil {
				break
			}
		}
		if err != nil {
			return nil, fmt.Errorf("journal: key line %d is neither %d raw bytes nor base64", i+1, KeySize)
		}
		if len(key) != KeySize {
			return nil, fmt.Errorf("journal: key line %d decodes to %d bytes, want %d", i+1, len(key), KeySize)
		}
		keys = append(keys, key)
	}
	if len(keys) == 0 {
		return nil, errors.New("journal: no key in the key file")
	}
	return keys, nil
}

// LoadKeyring reads the key files at paths (ParseKeys) and returns their
// keys as one keyring, in order: the first file's first key is the
// primary.
func LoadKeyring(paths ...string) (*Keyring, error) {
	var keys [][]byte
	for _, p := range paths {
		b, err := os.ReadFile(p)
		if err != nil {
			return nil, fmt.Errorf("journal: keyring: %w", err)
		}
		ks, err := ParseKeys(b)
		if err != nil {
			return nil, fmt.Errorf("%w (%s)", err, p)
		}
		keys = append(keys, ks...)
	}
	return NewKeyring(keys...)
}

// IDs returns the IDs (KeyID) of the keyring's keys, the primary first.
func (k *Keyring) IDs() []string {
	if k == nil {
		return nil
	}
	out := make([]string, len(k.keys))
	for i := range k.keys {
		out[i] = hex.EncodeToString(k.keys[i].id[:])
	}
	return out
}

func (k *Keyring) find(id [sealIDSize]byte) *sealKey {
	if k == nil {
		return nil
	}
	for i := range k.keys {
		if k.keys[i].id == id {
			return &k.keys[i]
		}
	}
	return nil
}

// sealer is a journal's sealing state, fixed at Open: the keyring (nil
// without one), the file's GroupResource (part of the additional data)
// and whether the file's resource is sealed.
type sealer struct {
	ring  *Keyring
	gr    schema.GroupResource
	seals bool      // the resource is sensitive
	index indexHash // how index values are stored (sealfile.go)
}

// initSeal sets j's sealer from o and the resource the file records. A
// read-only open of a file whose resource record does not decode still
// opens, as a file without sealing does: its sealed objects then fail to open
// (ErrBadRecord); a writable one fails, so that nothing is written
// unsealed that should be sealed.
func (j *Journal) initSeal(o *Options) error {
	r, ok, err := j.Resource()
	if err != nil && !o.ReadOnly {
		return err
	}
	s := &sealer{ring: o.Keyring}
	if ok {
		s.gr = r.GVR.GroupResource()
		s.seals = !r.MetadataOnly && (slices.Contains(DefaultSealResources, s.gr) || slices.Contains(o.SealResources, s.gr))
	}
	j.seal = s
	if o.ReadOnly {
		return j.initIndexHash() // sealfile.go
	}
	return j.recordSealing()
}

// active reports whether objects appended are sealed.
func (s *sealer) active() bool { return s != nil && s.ring != nil && s.seals }

// aad returns the additional data of an envelope: what it is bound to.
func (s *sealer) aad(id []byte, key string) []byte {
	a := make([]byte, 0, 32+len(s.gr.Group)+len(s.gr.Resource)+len(key))
	a = append(a, "watchjournal seal v1\x00"...)
	a = append(a, id...)
	a = append(a, s.gr.Group...)
	a = append(a, 0)
	a = append(a, s.gr.Resource...)
	a = append(a, 0)
	return append(a, key...)
}

// seal returns obj sealed under the primary key for the object key.
func (s *sealer) seal(key string, obj []byte) ([]byte, error) {
	pk := &s.ring.keys[0]
	out := make([]byte, sealHeader, sealHeader+len(obj)+pk.aead.Overhead())
	copy(out, sealMagic)
	out[4] = sealEnvelopeVersion
	copy(out[5:], pk.id[:])
	nonce := out[5+sealIDSize : sealHeader]
	if _, err := rand.Read(nonce); err != nil {
		return nil, fmt.Errorf("journal: seal: %w", err)
	}
	return pk.aead.Seal(out, nonce, obj, s.aad(pk.id[:], key)), nil
}

// isSealed reports whether b is an envelope.
func isSealed(b []byte) bool { return bytes.HasPrefix(b, sealMagic) }

// open returns the plaintext of b when it is an envelope, b itself
// otherwise. A key the keyring lacks is a *SealedError; an envelope that
// does not open (damaged, or moved from another key or resource) is an
// error matching ErrBadRecord.
func (s *sealer) open(key string, b []byte) ([]byte, error) {
	if !isSealed(b) {
		return b, nil
	}
	if len(b) < sealHeader || b[4] != sealEnvelopeVersion {
		return nil, fmt.Errorf("%w: %q: sealed object of unknown form", ErrBadRecord, key)
	}
	var id [sealIDSize]byte
	copy(id[:], b[5:])
	var ring *Keyring
	if s != nil {
		ring = s.ring
	}
	k := ring.find(id)
	if k == nil {
		return nil, &SealedError{KeyID: hex.EncodeToString(id[:]), Key: key, Have: ring.IDs()}
	}
	out, err := k.aead.Open(nil, b[5+sealIDSize:sealHeader], b[sealHeader:], s.aad(id[:], key))
	if err != nil {
		return nil, fmt.Errorf("%w: %q: sealed object does not open under key %s (damaged, or moved from another key or resource): %v",
			ErrBadRecord, key, hex.EncodeToString(id[:]), err)
	}
	return out, nil
}

// reseal returns obj sealed under the primary key when it is sealed under
// another key of the keyring, obj itself otherwise (not sealed, sealed
// under the primary, or under a key the keyring lacks: it stays as it
// is). An envelope that does not open is an error.
func (s *sealer) reseal(key string, obj []byte) ([]byte, error) {
	if s == nil || s.ring == nil || !isSealed(obj) || len(obj) < sealHeader {
		return obj, nil
	}
	var id [sealIDSize]byte
	copy(id[:], obj[5:])
	if id == s.ring.keys[0].id || s.ring.find(id) == nil {
		return obj, nil
	}
	plain, err := s.open(key, obj)
	if err != nil {
		return nil, err
	}
	return s.seal(key, plain)
}

// encode returns the stored form of e (encodeEvent), its Object sealed
// when the journal seals its resource. e is not changed.
func (s *sealer) encode(e *Event) ([]byte, error) {
	if !s.active() || len(e.Object) == 0 || isSealed(e.Object) {
		return encodeEvent(e)
	}
	sealed, err := s.seal(e.Key, e.Object)
	if err != nil {
		return nil, err
	}
	c := *e
	c.Object = sealed
	return encodeEvent(&c)
}

// openEvent replaces a sealed e.Object with its plaintext.
func (s *sealer) openEvent(e *Event) error {
	if !isSealed(e.Object) {
		return nil
	}
	obj, err := s.open(e.Key, e.Object)
	if err != nil {
		return fmt.Errorf("offset %d: %w", e.Offset, err)
	}
	e.Object = obj
	return nil
}

// Seals reports whether the journal seals the objects it appends: it was
// opened with a Keyring and its resource is sensitive
// (DefaultSealResources, Options.SealResources) and not metadata-only.
func (s Settings) Seals() bool { return s.j.seal.active() }

// Sensitive reports whether the journal's resource is one whose objects
// must be sealed (DefaultSealResources, Options.SealResources) and it
// keeps more than metadata: package reconcile refuses to write such a
// journal that does not Seal.
func (s Settings) Sensitive() bool { return s.j.seal != nil && s.j.seal.seals }

// KeyIDs returns the IDs of the journal's keys (Options.Keyring), the
// primary first; nil without a keyring.
func (s Settings) KeyIDs() []string {
	j := s.j
	if j.seal == nil {
		return nil
	}
	return j.seal.ring.IDs()
}

// SealKeyUse returns how many sealed objects the file holds under each key
// ID: in the retained journal records and in the objects bucket, read in
// one read transaction. It opens nothing and needs no key. A key of the
// keyring absent from it seals nothing the file holds: after a rotation,
// once the old key is absent, remove it (seal.go, "Rotation").
func (s Settings) SealKeyUse() (map[string]uint64, error) {
	j := s.j
	use := map[string]uint64{}
	count := func(obj []byte) {
		if isSealed(obj) && len(obj) >= sealHeader {
			use[hex.EncodeToString(obj[5:5+sealIDSize])]++
		}
	}
	err := j.store.View(func(tx storage.Tx) error {
		if first := tx.FirstOffset(); first != 0 {
			err := tx.Records(first, func(off uint64, rec []byte) (bool, error) {
				if len(rec) > 0 && rec[0]&sealedRecord != 0 {
					_, obj, err := recordObject(off, rec)
					if err != nil {
						return false, err
					}
					count(obj)
				}
				return true, nil
			})
			if err != nil {
				return err
			}
		}
		if !tx.HasObjects() {
			return nil
		}
		return tx.ObjectKeys(func(k []byte) error { count(tx.ObjectGet(k)); return nil })
	})
	return use, err
}
