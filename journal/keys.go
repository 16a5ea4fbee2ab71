package journal

// Key shape.
//
// An index key is exactly the bytes <namespace>/<name> for a namespaced
// object and <name> for a cluster-scoped one.
//
// Object keys and consumer names become bbolt keys (the index, the relist's
// seen set, the consumers bucket), and bbolt refuses an empty key and one
// longer than bbolt.MaxKeySize (32,768 bytes: MaxKeyBytes, a number here so
// that journal's API names no bbolt value; keys_internal_test.go checks the
// two agree). A conforming apiserver never sends such a key (a name is at
// most 253 characters, a namespace 63), but an aggregated API server or a
// caller might: the journal refuses it with ErrBadKey where it enters,
// before any transaction or stage file holds it, so that a bad key can
// never leave a relist half committed (the stage file's events are checked
// again when they move into the file).

import (
	"errors"
	"fmt"
)

// MaxKeyBytes is the longest object key or consumer name the journal
// stores, in bytes: the store's key limit.
const MaxKeyBytes = 32768

// ErrBadKey is returned for an object key or consumer name that is empty or
// longer than MaxKeyBytes: by Consumers.Open, and by the writer's
// append and relist (tx.go, relist.go), before anything is written.
var ErrBadKey = errors.New("journal: key empty or too long")

// checkKey returns an error matching ErrBadKey for an empty key or one
// longer than MaxKeyBytes; what names the key's role ("key", "consumer name").
func checkKey(what, k string) error {
	switch {
	case k == "":
		return fmt.Errorf("%w: empty %s", ErrBadKey, what)
	case len(k) > MaxKeyBytes:
		return fmt.Errorf("%w: %s %q is %d bytes, more than %d", ErrBadKey, what, clip(k), len(k), MaxKeyBytes)
	}
	return nil
}
