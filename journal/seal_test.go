package journal_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/watchjournal/watchjournal/journal"
)

var secrets = journal.Resource{GVR: schema.GroupVersionResource{Version: "v1", Resource: "secrets"}, Namespace: "wj"}

// sealKey returns a key of 32 bytes, all b.
func sealKey(b byte) []byte { return bytes.Repeat([]byte{b}, journal.KeySize) }

func keyring(t *testing.T, keys ...[]byte) *journal.Keyring {
	t.Helper()
	k, err := journal.NewKeyring(keys...)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

func openSealed(t *testing.T, path string, res journal.Resource, k *journal.Keyring, extra ...schema.GroupResource) *journal.Journal {
	t.Helper()
	j, err := journal.Open(path, &journal.Options{Resource: &res, NoSync: true, Keyring: k, SealResources: extra})
	if err != nil {
		t.Fatalf("Open(%s) = %v", path, err)
	}
	return j
}

// secretJSON is a Secret as the apiserver serves it: data in base64.
func secretJSON(name, value string) []byte {
	return []byte(`{"kind":"Secret","apiVersion":"v1","metadata":{"name":"` + name + `","namespace":"wj"},"data":{"password":"` +
		base64.StdEncoding.EncodeToString([]byte(value)) + `"}}`)
}

// assertNotInFile fails when any of the files at paths holds value or its
// base64.
func assertNotInFile(t *testing.T, value string, paths ...string) {
	t.Helper()
	for _, p := range paths {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		for _, s := range []string{value, base64.StdEncoding.EncodeToString([]byte(value))} {
			if bytes.Contains(b, []byte(s)) {
				t.Errorf("%s holds %q in plaintext", p, s)
			}
		}
	}
}

// Ensure that a Secret's data reaches neither the journal file (records,
// the objects bucket after trimming) nor the relist's stage file, and reads
// back whole with the key; without the key, reads of the object are a
// *SealedError naming the key while the index stays readable.
func TestSeal_SecretNeverInFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "s.db")
	ka := sealKey(1)
	j := openSealed(t, path, secrets, keyring(t, ka))
	if !j.Settings().Seals() || !j.Settings().Sensitive() {
		t.Fatalf("Seals, Sensitive = %v, %v; want true for Secrets with a keyring", j.Settings().Seals(), j.Settings().Sensitive())
	}
	keepObjects(t, j)
	appendEvents(t, j, "2",
		journal.Event{Type: journal.Added, Key: "wj/a", UID: "u1", ResourceVersion: "1", Origin: journal.OriginWatch, Object: secretJSON("a", "hunter2-a")},
		journal.Event{Type: journal.Added, Key: "wj/b", UID: "u2", ResourceVersion: "2", Origin: journal.OriginWatch, Object: secretJSON("b", "hunter2-b")})
	// A relist: its stage file exists until Commit.
	r, err := j.Writer().BeginRelist()
	if err != nil {
		t.Fatal(err)
	}
	mod := journal.Event{Type: journal.Modified, Key: "wj/a", UID: "u1", ResourceVersion: "3", Origin: journal.OriginRelist, Object: secretJSON("a", "hunter2-relisted")}
	if err := r.Stage([]journal.Event{mod}); err != nil {
		t.Fatal(err)
	}
	stage := path + ".relist"
	if _, err := os.Stat(stage); err != nil {
		t.Fatalf("stage file: %v", err)
	}
	assertNotInFile(t, "hunter2-relisted", stage)
	if _, _, err := r.Commit("3"); err != nil {
		t.Fatal(err)
	}
	// Trim everything: b's latest object moves to the objects bucket.
	if _, _, err := j.Writer().Trim(3, 100, 0, 0); err != nil {
		t.Fatal(err)
	}
	for key, want := range map[string]string{"wj/a": "hunter2-relisted", "wj/b": "hunter2-b"} {
		got, ok, err := get(t, j, key)
		if err != nil || !ok || got != string(secretJSON(key[3:], want)) {
			t.Errorf("Object(%s) = %q, %v, %v; want the opened Secret", key, got, ok, err)
		}
	}
	evs, err := j.Read(0, 0)
	if err != nil || len(evs) != 1 || string(evs[0].Object) != string(secretJSON("a", "hunter2-relisted")) {
		t.Fatalf("Read = %v, %v; want the relisted MODIFIED, opened", evs, err)
	}
	if err := j.Close(); err != nil {
		t.Fatal(err)
	}
	assertNotInFile(t, "hunter2-a", path)
	assertNotInFile(t, "hunter2-b", path)
	assertNotInFile(t, "hunter2-relisted", path)

	// Without the key: typed errors for the objects, the rest readable.
	j, err = journal.Open(path, &journal.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer j.Close()
	_, err = j.Read(0, 0)
	var se *journal.SealedError
	if !errors.As(err, &se) || !errors.Is(err, journal.ErrSealed) || se.KeyID != journal.KeyID(ka) || se.Key != "wj/a" {
		t.Fatalf("Read without the key = %v; want a *SealedError for wj/a naming key %s", err, journal.KeyID(ka))
	}
	for _, key := range []string{"wj/a", "wj/b"} {
		if _, _, err := get(t, j, key); !errors.As(err, &se) || se.KeyID != journal.KeyID(ka) {
			t.Errorf("Object(%s) without the key = %v; want a *SealedError", key, err)
		}
	}
	if e, ok, err := j.Lookup("wj/a"); err != nil || !ok || e.ResourceVersion != "3" || e.UID != "u1" {
		t.Errorf("Lookup(wj/a) without the key = %+v, %v, %v; want RV 3, UID u1", e, ok, err)
	}
	if s, err := j.Stats(); err != nil || s.Objects != 2 || s.LastOffset != 3 {
		t.Errorf("Stats without the key = %+v, %v", s, err)
	}
	if err := j.ViewObjects(func(v *journal.ObjectView) error {
		return v.Missing("", func(k string) (bool, error) {
			t.Errorf("Missing(%s): a sealed object is not missing", k)
			return true, nil
		})
	}); err != nil {
		t.Errorf("Missing without the key = %v", err)
	}
	if rep, err := j.Check(); err != nil || len(rep.Problems) != 0 {
		t.Errorf("Check without the key = %+v, %v; want a clean file", rep, err)
	}
}

// Ensure that rotation works: records sealed under key A read after B is
// added as the primary, new records are sealed under B, and once A is
// removed only A's records are a *SealedError naming A.
func TestSeal_Rotation(t *testing.T) {
	path := filepath.Join(t.TempDir(), "s.db")
	ka, kb := sealKey(1), sealKey(2)
	j := openSealed(t, path, secrets, keyring(t, ka))
	keepObjects(t, j)
	appendEvents(t, j, "1", journal.Event{Type: journal.Added, Key: "wj/a", UID: "u1", ResourceVersion: "1", Origin: journal.OriginWatch, Object: secretJSON("a", "under-a")})
	_ = j.Close()

	j = openSealed(t, path, secrets, keyring(t, kb, ka))
	if ids := j.Settings().KeyIDs(); len(ids) != 2 || ids[0] != journal.KeyID(kb) {
		t.Fatalf("KeyIDs = %v; want B first", ids)
	}
	appendEvents(t, j, "2", journal.Event{Type: journal.Added, Key: "wj/b", UID: "u2", ResourceVersion: "2", Origin: journal.OriginWatch, Object: secretJSON("b", "under-b")})
	evs, err := j.Read(0, 0)
	if err != nil || len(evs) != 2 || string(evs[0].Object) != string(secretJSON("a", "under-a")) || string(evs[1].Object) != string(secretJSON("b", "under-b")) {
		t.Fatalf("Read with [B, A] = %v, %v; want both opened", evs, err)
	}
	use, err := j.Settings().SealKeyUse()
	if err != nil || len(use) != 2 || use[journal.KeyID(ka)] != 1 || use[journal.KeyID(kb)] != 1 {
		t.Fatalf("SealKeyUse = %v, %v; want one object under each key", use, err)
	}
	_ = j.Close()

	j = openSealed(t, path, secrets, keyring(t, kb))
	var se *journal.SealedError
	if _, err := j.Read(1, 1); !errors.As(err, &se) || se.KeyID != journal.KeyID(ka) {
		t.Fatalf("Read of A's record with [B] = %v; want a *SealedError naming A (%s)", err, journal.KeyID(ka))
	}
	if evs, err := j.Read(2, 1); err != nil || len(evs) != 1 || string(evs[0].Object) != string(secretJSON("b", "under-b")) {
		t.Fatalf("Read of the new record with [B] = %v, %v; want it sealed under B", evs, err)
	}
	assertNotInFile(t, "under-a", path)
	assertNotInFile(t, "under-b", path)
	_ = j.Close()

	// Retention trims A's record: its copy in the objects bucket is sealed
	// again under the primary, B, and A is no longer in use.
	j = openSealed(t, path, secrets, keyring(t, kb, ka))
	if _, _, err := j.Writer().Trim(2, 100, 0, 0); err != nil {
		t.Fatal(err)
	}
	if use, err := j.Settings().SealKeyUse(); err != nil || len(use) != 1 || use[journal.KeyID(kb)] != 2 {
		t.Fatalf("SealKeyUse after trimming = %v, %v; want both objects under B only", use, err)
	}
	_ = j.Close()
	j = openSealed(t, path, secrets, keyring(t, kb))
	defer j.Close()
	if got, ok, err := get(t, j, "wj/a"); err != nil || !ok || got != string(secretJSON("a", "under-a")) {
		t.Fatalf("Object(wj/a) with [B] after trimming = %q, %v, %v; want it re-sealed under B", got, ok, err)
	}
	assertNotInFile(t, "under-a", path)
}

// Ensure that only sensitive resources are sealed: ConfigMaps stay plain
// with a keyring, unless SealResources lists them; a metadata-only file of
// Secrets holds no data to seal.
func TestSeal_SensitiveResources(t *testing.T) {
	k := keyring(t, sealKey(1))
	cms := journal.Resource{GVR: schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}}
	meta := secrets
	meta.MetadataOnly = true
	for _, c := range []struct {
		name  string
		res   journal.Resource
		extra []schema.GroupResource
		seals bool
	}{
		{"configmaps", cms, nil, false},
		{"configmaps listed", cms, []schema.GroupResource{{Resource: "configmaps"}}, true},
		{"secrets metadata-only", meta, nil, false},
		{"secrets", secrets, nil, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "j.db")
			j := openSealed(t, path, c.res, k, c.extra...)
			if j.Settings().Seals() != c.seals || j.Settings().Sensitive() != c.seals {
				t.Fatalf("Seals, Sensitive = %v, %v; want %v", j.Settings().Seals(), j.Settings().Sensitive(), c.seals)
			}
			appendEvents(t, j, "1", journal.Event{Type: journal.Added, Key: "wj/a", UID: "u1", ResourceVersion: "1", Origin: journal.OriginWatch, Object: []byte(`{"data":{"v":"plain-value"}}`)})
			_ = j.Close()
			b, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			if got := bytes.Contains(b, []byte("plain-value")); got == c.seals {
				t.Errorf("file holds the value in plaintext: %v; want %v", got, !c.seals)
			}
		})
	}
}

// Ensure that key files are read as a mounted Secret holds them: 32 raw
// bytes, or base64 lines (a keyring, the primary first).
func TestSeal_LoadKeyring(t *testing.T) {
	dir := t.TempDir()
	ka, kb := sealKey('a'), sealKey(2)
	raw := filepath.Join(dir, "raw")
	b64 := filepath.Join(dir, "b64")
	bad := filepath.Join(dir, "bad")
	for p, b := range map[string][]byte{
		raw: ka,
		b64: []byte(base64.StdEncoding.EncodeToString(kb) + "\n\n" + base64.RawURLEncoding.EncodeToString(ka) + "\n"),
		bad: []byte(base64.StdEncoding.EncodeToString(ka[:16]) + "\n"),
	} {
		if err := os.WriteFile(p, b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	k, err := journal.LoadKeyring(raw)
	if err != nil || len(k.IDs()) != 1 || k.IDs()[0] != journal.KeyID(ka) {
		t.Fatalf("LoadKeyring(raw) = %v, %v", k.IDs(), err)
	}
	if _, err := journal.LoadKeyring(b64, raw); err == nil {
		t.Fatal("LoadKeyring with a key twice: no error")
	}
	k, err = journal.LoadKeyring(b64)
	if err != nil || len(k.IDs()) != 2 || k.IDs()[0] != journal.KeyID(kb) || k.IDs()[1] != journal.KeyID(ka) {
		t.Fatalf("LoadKeyring(b64) = %v, %v; want [B, A]", k.IDs(), err)
	}
	if _, err := journal.LoadKeyring(bad); err == nil {
		t.Fatal("LoadKeyring of a 16-byte key: no error")
	}
	if _, err := journal.NewKeyring(); err == nil {
		t.Fatal("NewKeyring(): no error")
	}
}

// Ensure that the journal's other readers of objects see sealed objects
// opened: an index built from sealed objects already in the file, an index
// updated by a relist whose staged event carries its object sealed (as the
// stage file holds it), and ObjectView.Previous.
func TestSeal_IndexesAndPreviousOpenSealedObjects(t *testing.T) {
	path := filepath.Join(t.TempDir(), "s.db")
	j := openSealed(t, path, secrets, keyring(t, sealKey(1)))
	defer j.Close()
	keepObjects(t, j)
	appendEvents(t, j, "1",
		journal.Event{Type: journal.Added, Key: "wj/a", UID: "u1", ResourceVersion: "1", Origin: journal.OriginWatch, Object: secretJSON("a", "one")})
	password := func(obj []byte) ([]string, error) { // decodes the plaintext, or fails
		var s struct {
			Data map[string][]byte `json:"data"`
		}
		if err := json.Unmarshal(obj, &s); err != nil {
			return nil, err
		}
		return []string{string(s.Data["password"])}, nil
	}
	if err := j.Indexes().Add(map[string]journal.IndexFunc{"password": password}); err != nil {
		t.Fatalf("Indexes.Add over a sealed object = %v", err)
	}
	if st, err := j.Indexes().Reindex(context.Background(), []string{"password"}); err != nil || st.Rewritten != 1 {
		t.Fatalf("Reindex over a sealed object = %+v, %v; want 1 key rewritten", st, err)
	}
	if got, err := j.Indexes().Lookup("password", "one"); err != nil || len(got) != 1 || got[0] != "wj/a" {
		t.Fatalf("Indexes.Lookup(password, one) = %q, %v; want [wj/a]", got, err)
	}
	r, err := j.Writer().BeginRelist()
	if err != nil {
		t.Fatal(err)
	}
	mod := journal.Event{Type: journal.Modified, Key: "wj/a", UID: "u1", ResourceVersion: "2", PrevResourceVersion: "1", Origin: journal.OriginRelist, Object: secretJSON("a", "two")}
	if err := r.Stage([]journal.Event{mod}); err != nil {
		t.Fatal(err)
	}
	if _, _, err := r.Commit("2"); err != nil {
		t.Fatalf("relist commit with an index = %v", err)
	}
	if got, err := j.Indexes().Lookup("password", "two"); err != nil || len(got) != 1 || got[0] != "wj/a" {
		t.Fatalf("Indexes.Lookup(password, two) after the relist = %q, %v; want [wj/a]", got, err)
	}
	evs, err := j.Read(0, 0)
	if err != nil || len(evs) != 2 {
		t.Fatalf("Read = %v, %v; want the ADDED and the MODIFIED", evs, err)
	}
	if err := j.ViewObjects(func(v *journal.ObjectView) error {
		old, ok, err := v.Previous(evs[1])
		if err != nil || !ok || string(old) != string(secretJSON("a", "one")) {
			t.Errorf("Previous(MODIFIED) = %q, %v, %v; want the ADDED's Secret, opened", old, ok, err)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
}

// Ensure that a Reshard's moved DELETEDs are sealed like every other
// append: a key whose last object was stored in plaintext (before the
// journal had a key) leaves the range with its object sealed, so without
// the key its tombstone reads as a *SealedError, not as plaintext.
func TestSeal_ReshardTombstonesSealed(t *testing.T) {
	path := filepath.Join(t.TempDir(), "s.db")
	j, err := journal.Open(path, &journal.Options{Resource: &secrets, NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	keepObjects(t, j)
	var evs []journal.Event
	for i := range 16 {
		name := fmt.Sprintf("s%02d", i)
		evs = append(evs, journal.Event{Type: journal.Added, Key: "wj/" + name, UID: fmt.Sprintf("uid-%d", i), ResourceVersion: fmt.Sprint(i + 1),
			Origin: journal.OriginWatch, Object: secretJSON(name, "plain-"+name)})
	}
	appendEvents(t, j, "16", evs...)
	if err := j.Close(); err != nil {
		t.Fatal(err)
	}
	j = openSealed(t, path, secrets, keyring(t, sealKey(1)))
	res, err := j.Writer().Reshard("shardRange(object.metadata.uid, '0x0000000000000000', '0x8000000000000000')")
	if err != nil || res.Left == 0 {
		t.Fatalf("Reshard = %+v, %v; want some of 16 keys to leave", res, err)
	}
	moved, err := j.Read(res.First, 0)
	if err != nil || len(moved) != res.Left || moved[0].Object == nil {
		t.Fatalf("Read(%d) with the key = %d events, %v; want %d moved DELETEDs with their objects", res.First, len(moved), err, res.Left)
	}
	if err := j.Close(); err != nil {
		t.Fatal(err)
	}
	j, err = journal.Open(path, &journal.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer j.Close()
	for off := res.First; off <= res.Last; off++ {
		var se *journal.SealedError
		if evs, err := j.Read(off, 1); !errors.As(err, &se) {
			if len(evs) == 1 {
				t.Errorf("Read(%d) without the key = %s %s in plaintext, %v; want a *SealedError (the moved DELETED's object sealed)", off, evs[0].Type, evs[0].Key, err)
				continue
			}
			t.Errorf("Read(%d) without the key = %v, %v; want a *SealedError (the moved DELETED's object sealed)", off, evs, err)
		}
	}
}
