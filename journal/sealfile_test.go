package journal_test

import (
	"context"
	"encoding/json"
	"errors"
	"path/filepath"
	"slices"
	"testing"

	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/watchjournal/watchjournal/journal"
)

// passwordIndex indexes a Secret (secretJSON) by its decoded password.
func passwordIndex(obj []byte) ([]string, error) {
	var s struct {
		Data map[string][]byte `json:"data"`
	}
	if err := json.Unmarshal(obj, &s); err != nil {
		return nil, err
	}
	return []string{string(s.Data["password"])}, nil
}

func indexPasswords(t *testing.T, j *journal.Journal) {
	t.Helper()
	if err := j.Indexes().Add(map[string]journal.IndexFunc{"password": passwordIndex}); err != nil {
		t.Fatal(err)
	}
	if _, err := j.Indexes().Reindex(context.Background(), []string{"password"}); err != nil {
		t.Fatal(err)
	}
}

// Ensure that a sealed file's index values are stored as keyed hashes: a
// lookup finds the keys holding a value, the file holds no value in
// plaintext, the values cannot be listed back, and a rotation of the
// primary key drops the indexes until they are registered again.
func TestSealFile_IndexValuesHashed(t *testing.T) {
	path := filepath.Join(t.TempDir(), "s.db")
	const p1, p2 = "sealfile-password-one-0c4e", "sealfile-password-two-9a1d"
	ka, kb := sealKey(1), sealKey(2)
	j := openSealed(t, path, secrets, keyring(t, ka))
	keepObjects(t, j)
	indexPasswords(t, j)
	a, b, c := ev(journal.Added, "wj/a", "ua", "1"), ev(journal.Added, "wj/b", "ub", "2"), ev(journal.Added, "wj/c", "uc", "3")
	a.Object, b.Object, c.Object = secretJSON("a", p1), secretJSON("b", p2), secretJSON("c", p1)
	appendEvents(t, j, "3", a, b, c)
	if !j.Indexes().Hashed() {
		t.Fatal("Indexes.Hashed() = false for a sealed file")
	}
	for v, want := range map[string][]string{p1: {"wj/a", "wj/c"}, p2: {"wj/b"}, "none": nil} {
		if got, err := j.Indexes().Lookup("password", v); err != nil || !slices.Equal(got, want) {
			t.Errorf("Indexes.Lookup(password, %s) = %v, %v; want %v", v, got, err, want)
		}
	}
	if got, err := j.Indexes().Values("password"); !errors.Is(err, journal.ErrNoIndex) {
		t.Errorf("Indexes.Values(password) = %q, %v; want ErrNoIndex: the values are hashed", got, err)
	}
	if err := j.Close(); err != nil {
		t.Fatal(err)
	}
	assertNotInFile(t, p1, path)
	assertNotInFile(t, p2, path)

	// A reader with the key looks up; one without cannot and says so.
	r, err := journal.Open(path, &journal.Options{ReadOnly: true, Keyring: keyring(t, kb, ka)})
	if err != nil {
		t.Fatal(err)
	}
	if got, err := r.Indexes().Lookup("password", p2); err != nil || !slices.Equal(got, []string{"wj/b"}) {
		t.Errorf("reader with the key: Indexes.Lookup(password, p2) = %v, %v; want [wj/b]", got, err)
	}
	_ = r.Close()
	r, err = journal.Open(path, &journal.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	if got, err := r.Indexes().Lookup("password", p2); !errors.Is(err, journal.ErrIndexPending) {
		t.Errorf("reader without the key: Indexes.Lookup = %v, %v; want ErrIndexPending", got, err)
	}
	_ = r.Close()

	// Rotation: kb seals now; the entries hashed under ka are dropped.
	j = openSealed(t, path, secrets, keyring(t, kb, ka))
	defer j.Close()
	if names, err := j.Indexes().Names(); err != nil || len(names) != 0 {
		t.Fatalf("Indexes() after a rotation = %v, %v; want none (rebuilt when registered)", names, err)
	}
	indexPasswords(t, j)
	if got, err := j.Indexes().Lookup("password", p1); err != nil || !slices.Equal(got, []string{"wj/a", "wj/c"}) {
		t.Errorf("after the rotation and a reindex: Indexes.Lookup(password, p1) = %v, %v; want [wj/a wj/c]", got, err)
	}
}

// Ensure that a file that seals its resource refuses a writer that would
// not: without a keyring, or without the resource in SealResources, Open
// fails with a *SealingError naming the option; a reader opens it.
func TestSealFile_WriterThatWouldNotSealRefused(t *testing.T) {
	dir := t.TempDir()
	widgets := journal.Resource{GVR: schema.GroupVersionResource{Group: "example.com", Version: "v1", Resource: "widgets"}}
	wgr := widgets.GVR.GroupResource()
	for _, tc := range []struct {
		name   string
		res    journal.Resource
		extra  []schema.GroupResource
		reopen journal.Options
		option string
	}{
		{"secrets without a keyring", secrets, nil, journal.Options{Resource: &secrets}, "Options.Keyring"},
		{"widgets without a keyring", widgets, []schema.GroupResource{wgr}, journal.Options{Resource: &widgets, SealResources: []schema.GroupResource{wgr}}, "Options.Keyring"},
		{"widgets dropped from SealResources", widgets, []schema.GroupResource{wgr}, journal.Options{Resource: &widgets, Keyring: keyring(t, sealKey(1))}, "Options.SealResources"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(dir, tc.name+".db")
			j := openSealed(t, path, tc.res, keyring(t, sealKey(1)), tc.extra...)
			e := ev(journal.Added, "wj/a", "ua", "1")
			e.Object = secretJSON("a", "sealfile-refused-7b2c")
			appendEvents(t, j, "1", e)
			_ = j.Close()
			tc.reopen.NoSync = true
			j, err := journal.Open(path, &tc.reopen)
			if err == nil {
				_ = j.Close()
			}
			var se *journal.SealingError
			if !errors.As(err, &se) || !errors.Is(err, journal.ErrSealingDropped) || se.Option != tc.option || se.Resource != wantResource(tc.res) {
				t.Fatalf("Open = %v; want a *SealingError naming %s and %s", err, tc.option, wantResource(tc.res))
			}
			r, err := journal.Open(path, &journal.Options{ReadOnly: true})
			if err != nil {
				t.Fatalf("a read-only Open = %v", err)
			}
			_ = r.Close()
			assertNotInFile(t, "sealfile-refused-7b2c", path)
		})
	}
}

func wantResource(r journal.Resource) string { return r.GVR.GroupResource().String() }
