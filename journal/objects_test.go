package journal_test

import (
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/watchjournal/watchjournal/journal"
	"github.com/watchjournal/watchjournal/journal/bolt"
)

func obj(typ journal.EventType, key, uid, rv, body string) journal.Event {
	e := ev(typ, key, uid, rv)
	e.Object = []byte(body)
	return e
}

// get reads key's object and the head in one view.
func get(t *testing.T, j *journal.Journal, key string) (string, bool, error) {
	t.Helper()
	b, _, ok, err := j.Object(key)
	return string(b), ok, err
}

// Ensure that the objects bucket follows live appends, a relist moved out
// of its stage file, retention trimming and a reopen: each key reads its
// last object, a deleted key reads absent.
func TestJournal_Objects_FollowAppendsRelistTrimRestart(t *testing.T) {
	path := filepath.Join(t.TempDir(), "j.db")
	j := open(t, path)
	if err := j.KeepObjects(); err != nil {
		t.Fatal(err)
	}
	appendEvents(t, j, "3",
		obj(journal.Added, "wj/a", "u1", "1", `{"a":1}`),
		obj(journal.Added, "wj/b", "u2", "2", `{"b":1}`),
		obj(journal.Modified, "wj/a", "u1", "3", `{"a":2}`))
	if got, ok, err := get(t, j, "wj/a"); got != `{"a":2}` || !ok || err != nil {
		t.Fatalf("Object(wj/a) = %q, %v, %v; want the MODIFIED's object", got, ok, err)
	}
	// A relist: b deleted (tombstone, no object), a modified, c added.
	r, err := j.Writer().BeginRelist()
	if err != nil {
		t.Fatal(err)
	}
	tomb := ev(journal.Deleted, "wj/b", "u2", "2")
	tomb.Object, tomb.Origin = nil, journal.OriginRelist
	mod := obj(journal.Modified, "wj/a", "u1", "4", `{"a":3}`)
	add := obj(journal.Added, "wj/c", "u3", "5", `{"c":1}`)
	mod.Origin, add.Origin = journal.OriginRelist, journal.OriginRelist
	if err := r.Stage([]journal.Event{tomb, mod, add}); err != nil {
		t.Fatal(err)
	}
	if _, _, err := r.Commit("5"); err != nil {
		t.Fatal(err)
	}
	// Trim every event: the objects stay.
	if _, _, err := j.Writer().Trim(7, 0, 0); err != nil {
		t.Fatal(err)
	}
	if err := j.Close(); err != nil {
		t.Fatal(err)
	}
	j = open(t, path)
	want := map[string]string{"wj/a": `{"a":3}`, "wj/c": `{"c":1}`}
	var head uint64
	got := map[string]string{}
	err = j.ViewObjects(func(v *journal.ObjectView) error {
		head = v.Head()
		return v.Scan("wj/", func(k string, o []byte) (bool, error) { got[k] = string(o); return true, nil })
	})
	if err != nil || len(got) != 2 || got["wj/a"] != want["wj/a"] || got["wj/c"] != want["wj/c"] || head != 6 {
		t.Fatalf("after relist, trim and reopen: Scan = %v, head %d, %v; want %v at head 6", got, head, err, want)
	}
	if _, ok, err := get(t, j, "wj/b"); ok || err != nil {
		t.Errorf("Object(wj/b) after its tombstone = ok %v, %v; want absent", ok, err)
	}
}

// Ensure that a file that did not keep objects reads ErrObjectsNotKept;
// switched on over its index, a live key without a stored object is
// ErrNoObject, listed by Missing, and fills on its next change.
func TestJournal_Objects_SwitchedOnOverAnIndex(t *testing.T) {
	j := open(t, filepath.Join(t.TempDir(), "j.db"))
	appendEvents(t, j, "1", obj(journal.Added, "wj/old", "u1", "1", `{"x":0}`))
	if _, ok, err := get(t, j, "wj/old"); ok || !errors.Is(err, journal.ErrObjectsNotKept) {
		t.Fatalf("Object(wj/old) before KeepObjects = ok %v, %v; want ErrObjectsNotKept", ok, err)
	}
	if err := j.KeepObjects(); err != nil {
		t.Fatal(err)
	}
	if _, ok, err := get(t, j, "wj/old"); ok || !errors.Is(err, journal.ErrNoObject) {
		t.Fatalf("Object(wj/old) = ok %v, %v; want ErrNoObject", ok, err)
	}
	var missing []string
	_ = j.ViewObjects(func(v *journal.ObjectView) error {
		return v.Missing("wj/", func(k string) (bool, error) { missing = append(missing, k); return true, nil })
	})
	if len(missing) != 1 || missing[0] != "wj/old" {
		t.Fatalf("Missing = %v; want [wj/old]", missing)
	}
	appendEvents(t, j, "2", obj(journal.Modified, "wj/old", "u1", "2", `{"x":1}`))
	if got, ok, err := get(t, j, "wj/old"); got != `{"x":1}` || !ok || err != nil {
		t.Fatalf("Object(wj/old) after a change = %q, %v, %v; want it filled", got, ok, err)
	}
}

// Ensure that the file check reports an object whose key is not in the
// index, and passes a file that keeps objects through deletes.
func TestJournal_Verify_ObjectWithoutIndexEntry(t *testing.T) {
	j := open(t, filepath.Join(t.TempDir(), "j.db"))
	if err := j.KeepObjects(); err != nil {
		t.Fatal(err)
	}
	appendEvents(t, j, "2", obj(journal.Added, "wj/a", "u1", "1", `{}`), ev(journal.Deleted, "wj/a", "u1", "2"))
	if rep, err := j.Verify(); err != nil || !rep.OK() {
		t.Fatalf("Verify = %+v, %v; want no problems", rep, err)
	}
	if err := j.Writer().Store().Update(func(tx *bolt.Tx) error { return tx.ObjectPut([]byte("wj/ghost"), []byte(`{}`)) }); err != nil {
		t.Fatal(err)
	}
	rep, err := j.Verify()
	if err != nil || rep.OK() || !strings.Contains(fmt.Sprint(rep.Problems), "wj/ghost") {
		t.Fatalf("Verify with a stray object = %+v, %v; want a problem naming wj/ghost", rep, err)
	}
}
