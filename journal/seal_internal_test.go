package journal

import (
	"bytes"
	"errors"
	"testing"

	"k8s.io/apimachinery/pkg/runtime/schema"
)

func testSealer(t testing.TB, gr schema.GroupResource, keys ...[]byte) *sealer {
	t.Helper()
	k, err := NewKeyring(keys...)
	if err != nil {
		t.Fatal(err)
	}
	return &sealer{ring: k, gr: gr, seals: true}
}

// Ensure that an envelope opens only whole, under its own key, for its own
// object key and resource: a flipped bit anywhere, another key, another
// object key or another resource is an error (ErrBadRecord), and a key the
// keyring lacks is a *SealedError naming it.
func TestSeal_Envelope(t *testing.T) {
	secrets := schema.GroupResource{Resource: "secrets"}
	ka, kb := bytes.Repeat([]byte{1}, KeySize), bytes.Repeat([]byte{2}, KeySize)
	s := testSealer(t, secrets, ka)
	plain := []byte(`{"data":{"p":"aHVudGVyMg=="}}`)
	env, err := s.seal("wj/a", plain)
	if err != nil {
		t.Fatal(err)
	}
	if !isSealed(env) || bytes.Contains(env, plain[10:]) {
		t.Fatalf("envelope %q: not marked, or holds the plaintext", env)
	}
	if again, _ := s.seal("wj/a", plain); bytes.Equal(again, env) {
		t.Fatal("two sealings of one object are equal: the nonce is not fresh")
	}
	if got, err := s.open("wj/a", env); err != nil || !bytes.Equal(got, plain) {
		t.Fatalf("open = %q, %v; want the plaintext", got, err)
	}
	for i := 4; i < len(env); i++ {
		bad := bytes.Clone(env)
		bad[i] ^= 0x10
		got, err := s.open("wj/a", bad)
		if err == nil {
			t.Fatalf("open with byte %d flipped = %q; want an error", i, got)
		}
		if i >= 5+sealIDSize && !errors.Is(err, ErrBadRecord) {
			t.Fatalf("open with byte %d flipped = %v; want ErrBadRecord", i, err)
		}
	}
	if _, err := s.open("wj/b", env); !errors.Is(err, ErrBadRecord) {
		t.Errorf("open under another object key = %v; want ErrBadRecord", err)
	}
	other := testSealer(t, schema.GroupResource{Resource: "configmaps"}, ka)
	if _, err := other.open("wj/a", env); !errors.Is(err, ErrBadRecord) {
		t.Errorf("open in another resource's file = %v; want ErrBadRecord", err)
	}
	// The same key ID with another key's envelope body: relabelled.
	sb := testSealer(t, secrets, kb)
	envB, _ := sb.seal("wj/a", plain)
	relabelled := bytes.Clone(envB)
	copy(relabelled[5:], env[5:5+sealIDSize])
	if _, err := s.open("wj/a", relabelled); !errors.Is(err, ErrBadRecord) {
		t.Errorf("open of B's envelope relabelled with A's ID = %v; want ErrBadRecord", err)
	}
	var se *SealedError
	if _, err := sb.open("wj/a", env); !errors.As(err, &se) || se.KeyID != KeyID(ka) || !errors.Is(err, ErrSealed) {
		t.Errorf("open with the wrong key = %v; want a *SealedError naming %s", err, KeyID(ka))
	}
	var none *sealer
	if _, err := none.open("wj/a", env); !errors.As(err, &se) || len(se.Have) != 0 {
		t.Errorf("open without a keyring = %v; want a *SealedError", err)
	}
	if got, err := none.open("wj/a", plain); err != nil || !bytes.Equal(got, plain) {
		t.Errorf("open of a plain object = %q, %v; want it unchanged", got, err)
	}
}

// Ensure that a sealed record carries the sealed bit, decodes with its
// envelope, and that a record whose bit and object disagree is
// ErrBadRecord for both decoders.
func TestSeal_RecordMark(t *testing.T) {
	s := testSealer(t, schema.GroupResource{Resource: "secrets"}, bytes.Repeat([]byte{1}, KeySize))
	e := Event{Type: Added, Key: "wj/a", UID: "u", ResourceVersion: "1", Origin: OriginWatch, Object: []byte(`{"a":1}`)}
	rec, err := s.encode(&e)
	if err != nil {
		t.Fatal(err)
	}
	if rec[0] != recordVersion|sealedRecord || string(e.Object) != `{"a":1}` {
		t.Fatalf("version byte %#x, event object %q; want %#x and the event unchanged", rec[0], e.Object, recordVersion|sealedRecord)
	}
	d, err := decodeEvent(1, rec)
	if err != nil || !isSealed(d.Object) {
		t.Fatalf("decodeEvent = %v; want the envelope", err)
	}
	if _, obj, err := recordObject(1, rec); err != nil || !isSealed(obj) {
		t.Fatalf("recordObject = %v; want the envelope", err)
	}
	plainRec, _ := encodeEvent(&e)
	for _, r := range [][]byte{
		append([]byte{rec[0] &^ sealedRecord}, rec[1:]...),
		append([]byte{plainRec[0] | sealedRecord}, plainRec[1:]...),
	} {
		if _, err := decodeEvent(1, r); !errors.Is(err, ErrBadRecord) {
			t.Errorf("decodeEvent of a mismatched mark = %v; want ErrBadRecord", err)
		}
		if _, _, err := recordObject(1, r); !errors.Is(err, ErrBadRecord) {
			t.Errorf("recordObject of a mismatched mark = %v; want ErrBadRecord", err)
		}
	}
}

// FuzzOpenEnvelope: opening any bytes never panics, and returns bytes only
// for what is not an envelope (unchanged) or for an envelope the key
// sealed (its plaintext): a changed envelope is an error.
func FuzzOpenEnvelope(f *testing.F) {
	s := testSealer(f, schema.GroupResource{Resource: "secrets"}, bytes.Repeat([]byte{1}, KeySize))
	plain := []byte(`{"data":{"p":"aHVudGVyMg=="}}`)
	env, err := s.seal("wj/a", plain)
	if err != nil {
		f.Fatal(err)
	}
	f.Add(env)
	f.Add(plain)
	f.Add([]byte("\x00wjs"))
	f.Add([]byte("\x00wjs\x01short"))
	f.Fuzz(func(t *testing.T, b []byte) {
		got, err := s.open("wj/a", b)
		switch {
		case err != nil:
			if !errors.Is(err, ErrBadRecord) && !errors.Is(err, ErrSealed) {
				t.Fatalf("open = %v; want ErrBadRecord or ErrSealed", err)
			}
		case !isSealed(b):
			if !bytes.Equal(got, b) {
				t.Fatalf("open of a plain object changed it")
			}
		case !bytes.Equal(got, plain):
			// Only plain was ever sealed under this key for wj/a (in this
			// process or a fuzz worker, each with envelopes of its own).
			t.Fatalf("open of %q = %q; only an envelope sealed by the key opens", b, got)
		}
	})
}
