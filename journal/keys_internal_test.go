package journal

import (
	"testing"

	bbolt "go.etcd.io/bbolt"
)

// Ensure that MaxKeyBytes is the key limit of the bbolt this build stores
// in: a longer limit would let a key through checkKey that bbolt refuses
// inside a transaction.
func TestMaxKeyBytes_IsBboltLimit(t *testing.T) {
	if MaxKeyBytes != bbolt.MaxKeySize {
		t.Fatalf("MaxKeyBytes = %d; bbolt.MaxKeySize = %d", MaxKeyBytes, bbolt.MaxKeySize)
	}
}
