package journal_test

// The journal files in testdata/journal were written by released schema
// versions (one per version, by internal/testing/schemafile) and are never
// rewritten: today's code must read each exactly as it was written, or
// migrate it on a writable open and then read the same; a file that claims
// a newer schema is refused with ErrNewerSchema and left untouched.

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	bbolt "go.etcd.io/bbolt"

	"github.com/watchjournal/watchjournal/internal/testing/schemafile"
	"github.com/watchjournal/watchjournal/journal"
	"github.com/watchjournal/watchjournal/journal/bolt"
)

const schemaDir = "../testdata/journal"

// schemaFiles returns the committed files, and fails when today's schema
// version has none (a schema change must add its file).
func schemaFiles(t *testing.T) []string {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(schemaDir, "v*.db"))
	if err != nil {
		t.Fatal(err)
	}
	today := filepath.Join(schemaDir, fmt.Sprintf("v%d.db", bolt.SchemaVersion))
	if _, err := os.Stat(today); err != nil {
		t.Fatalf("no journal file of today's schema version %d (%v): add it with go run ./internal/testing/schemafile/write (testdata/README.md)", bolt.SchemaVersion, err)
	}
	return files
}

// copyFile copies a committed file to a temporary one, so that no test
// changes testdata.
func copyFile(t *testing.T, src string) string {
	t.Helper()
	b, err := os.ReadFile(src)
	if err != nil {
		t.Fatal(err)
	}
	dst := filepath.Join(t.TempDir(), filepath.Base(src))
	if err := os.WriteFile(dst, b, 0o600); err != nil {
		t.Fatal(err)
	}
	return dst
}

// wantContent reads v<N>.json, what the file held when it was written.
func wantContent(t *testing.T, db string) schemafile.Content {
	t.Helper()
	b, err := os.ReadFile(strings.TrimSuffix(db, ".db") + ".json")
	if err != nil {
		t.Fatal(err)
	}
	var c schemafile.Content
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&c); err != nil {
		t.Fatalf("%s: %v", db, err)
	}
	return c
}

func equalContent(t *testing.T, what string, got, want schemafile.Content) {
	t.Helper()
	g, _ := json.MarshalIndent(got, "", "  ")
	w, _ := json.MarshalIndent(want, "", "  ")
	if !bytes.Equal(g, w) {
		t.Fatalf("%s: content differs from what the file was written with\ngot:\n%s\nwant:\n%s", what, g, w)
	}
}

// Every committed file opens read-only and writable and reads back exactly
// its events (offsets, types, origins, times, objects), index, consumer
// offsets, retention, resource and resourceVersion; after a writable open
// it takes new events and a consumer reads on from its offset.
func TestSchemaFiles_ReadBackExactly(t *testing.T) {
	for _, src := range schemaFiles(t) {
		t.Run(filepath.Base(src), func(t *testing.T) {
			want := wantContent(t, src)
			path := copyFile(t, src)

			j, err := journal.Open(path, &journal.Options{ReadOnly: true})
			if err != nil {
				t.Fatalf("read-only open: %v", err)
			}
			got, err := schemafile.Dump(j)
			_ = j.Close()
			if err != nil {
				t.Fatalf("read-only dump: %v", err)
			}
			equalContent(t, "read-only open", got, want)

			r := want.Resource
			j, err = journal.Open(path, &journal.Options{Resource: &r})
			if err != nil {
				t.Fatalf("writable open with the recorded resource: %v", err)
			}
			defer j.Close()
			if got, err = schemafile.Dump(j); err != nil {
				t.Fatalf("dump after a writable open: %v", err)
			}
			equalContent(t, "writable open", got, want)

			// The file goes on: a consumer resumes after its offset and
			// sees the new event after the old ones.
			c, err := j.Consumers().Open(schemafile.ConsumerOps)
			if err != nil {
				t.Fatal(err)
			}
			if c.Position() != schemafile.CommittedOps+1 {
				t.Fatalf("consumer %q resumes at %d, want %d", schemafile.ConsumerOps, c.Position(), schemafile.CommittedOps+1)
			}
			var off uint64
			if err := j.Writer().Update(func(tx *journal.Tx) error {
				e := journal.Event{Type: journal.Added, Key: "wj/new", UID: "uid-new", ResourceVersion: "99", Origin: journal.OriginWatch, Object: []byte(`{}`)}
				if off, err = tx.Append(&e); err != nil {
					return err
				}
				return tx.SetResourceVersion("99")
			}); err != nil {
				t.Fatalf("append after a writable open: %v", err)
			}
			if off != want.Head+1 {
				t.Fatalf("the new event has offset %d, want %d", off, want.Head+1)
			}
			evs, err := c.TryNext(100)
			if err != nil {
				t.Fatal(err)
			}
			var offs []uint64
			for _, e := range evs {
				offs = append(offs, e.Offset)
			}
			if len(evs) != int(want.Head+1-schemafile.CommittedOps) || evs[len(evs)-1].Key != "wj/new" {
				t.Fatalf("consumer read offsets %v, want %d..%d ending in wj/new", offs, schemafile.CommittedOps+1, want.Head+1)
			}
		})
	}
}

// A committed file whose schema number is raised past this build's is
// refused with ErrNewerSchema, read-only and writable, and is not changed
// by the attempt.
func TestSchemaFiles_NewerSchemaRefused(t *testing.T) {
	for _, src := range schemaFiles(t) {
		t.Run(filepath.Base(src), func(t *testing.T) {
			path := copyFile(t, src)
			db, err := bbolt.Open(path, 0o600, nil)
			if err != nil {
				t.Fatal(err)
			}
			var v [4]byte
			binary.BigEndian.PutUint32(v[:], bolt.SchemaVersion+1)
			if err := db.Update(func(tx *bbolt.Tx) error { return tx.Bucket([]byte("meta")).Put([]byte("schema"), v[:]) }); err != nil {
				t.Fatal(err)
			}
			_ = db.Close()
			before, _ := os.ReadFile(path)
			for _, ro := range []bool{true, false} {
				j, err := journal.Open(path, &journal.Options{ReadOnly: ro})
				if !errors.Is(err, journal.ErrNewerSchema) {
					if j != nil {
						_ = j.Close()
					}
					t.Fatalf("Open(schema %d, ReadOnly=%v) = %v; want ErrNewerSchema", bolt.SchemaVersion+1, ro, err)
				}
			}
			if after, _ := os.ReadFile(path); !bytes.Equal(before, after) {
				t.Fatal("a refused open changed the file")
			}
		})
	}
}
