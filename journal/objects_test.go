package journal_test

import (
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/watchjournal/watchjournal/internal/storage"
	"github.com/watchjournal/watchjournal/journal"
	"github.com/watchjournal/watchjournal/journal/compactor"
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
	keepObjects(t, j)
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
	if n, _, err := j.Writer().Trim(7, 100, 0, 0); err != nil || n != 6 {
		t.Fatalf("Trim = %d, %v; want the 6 events", n, err)
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
// switched on, a live key whose latest record is retained reads at once,
// one whose latest record was trimmed while objects were not kept is
// ErrNoObject, listed by Missing, and fills on its next change.
func TestJournal_Objects_SwitchedOnOverAnIndex(t *testing.T) {
	j := open(t, filepath.Join(t.TempDir(), "j.db"))
	appendEvents(t, j, "1", obj(journal.Added, "wj/old", "u1", "1", `{"x":0}`))
	appendEvents(t, j, "2", obj(journal.Added, "wj/new", "u2", "2", `{"y":0}`))
	if _, ok, err := get(t, j, "wj/old"); ok || !errors.Is(err, journal.ErrObjectsNotKept) {
		t.Fatalf("Object(wj/old) before KeepObjects = ok %v, %v; want ErrObjectsNotKept", ok, err)
	}
	if n, _, err := j.Writer().Trim(2, 100, 0, 0); err != nil || n != 1 {
		t.Fatalf("Trim = %d, %v; want wj/old's event", n, err)
	}
	keepObjects(t, j)
	if got, ok, err := get(t, j, "wj/new"); got != `{"y":0}` || !ok || err != nil {
		t.Fatalf("Object(wj/new), its record retained = %q, %v, %v; want it", got, ok, err)
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
	appendEvents(t, j, "3", obj(journal.Modified, "wj/old", "u1", "3", `{"x":1}`))
	if got, ok, err := get(t, j, "wj/old"); got != `{"x":1}` || !ok || err != nil {
		t.Fatalf("Object(wj/old) after a change = %q, %v, %v; want it filled", got, ok, err)
	}
}

// scanAll reads every live key's object in one view.
func scanAll(t *testing.T, j *journal.Journal) map[string]string {
	t.Helper()
	got := map[string]string{}
	err := j.ViewObjects(func(v *journal.ObjectView) error {
		return v.Scan("", func(k string, o []byte) (bool, error) { got[k] = string(o); return true, nil })
	})
	if err != nil {
		t.Fatalf("Scan = %v", err)
	}
	return got
}

// wantObjects checks Get and Scan of every key against want (key → object;
// keys absent from want must read absent), and the file check.
func wantObjects(t *testing.T, j *journal.Journal, what string, want map[string]string, absent ...string) {
	t.Helper()
	for k, w := range want {
		if got, ok, err := get(t, j, k); got != w || !ok || err != nil {
			t.Fatalf("%s: Object(%s) = %q, %v, %v; want %q", what, k, got, ok, err, w)
		}
	}
	for _, k := range absent {
		if got, ok, err := get(t, j, k); ok || err != nil {
			t.Fatalf("%s: Object(%s) = %q, %v, %v; want absent", what, k, got, ok, err)
		}
	}
	if got := scanAll(t, j); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("%s: Scan = %v; want %v", what, got, want)
	}
	if rep, err := j.Check(); err != nil || !rep.OK() {
		t.Fatalf("%s: Check = %+v, %v; want no problems", what, rep, err)
	}
}

// Ensure that trimming the record a live key's index entry points at keeps
// that object (copied into the objects bucket), that a later event
// supersedes the copy, that a trim of the newer record replaces it, that a
// delete removes it so a same-name recreation never reads the old object,
// that an object-less MODIFIED never leaves a stale copy served as
// current, and that all of it survives a reopen and a file rewrite
// (journalctl compact).
func TestJournal_Objects_TrimmedLatestRecord(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "j.db")
	j := open(t, path)
	keepObjects(t, j)
	trim := func(before uint64, want int) {
		t.Helper()
		if n, _, err := j.Writer().Trim(before, 100, 0, 0); err != nil || n != want {
			t.Fatalf("Trim(%d) = %d, %v; want %d", before, n, err, want)
		}
	}
	appendEvents(t, j, "2", // 1, 2
		obj(journal.Added, "wj/a", "ua1", "1", `{"a":1}`),
		obj(journal.Added, "wj/b", "ub1", "2", `{"b":1}`))
	trim(3, 2)
	wantObjects(t, j, "both latest records trimmed", map[string]string{"wj/a": `{"a":1}`, "wj/b": `{"b":1}`})

	appendEvents(t, j, "3", obj(journal.Modified, "wj/a", "ua1", "3", `{"a":2}`)) // 3
	wantObjects(t, j, "a modified after its copy", map[string]string{"wj/a": `{"a":2}`, "wj/b": `{"b":1}`})
	trim(4, 1)
	wantObjects(t, j, "a's newer record trimmed", map[string]string{"wj/a": `{"a":2}`, "wj/b": `{"b":1}`})

	// b deleted and recreated with a new UID in one transaction, then its
	// records trimmed: the recreation's object, never the old one.
	appendEvents(t, j, "5", // 4, 5
		ev(journal.Deleted, "wj/b", "ub1", "4"),
		obj(journal.Added, "wj/b", "ub2", "5", `{"b":"new"}`))
	wantObjects(t, j, "b recreated", map[string]string{"wj/a": `{"a":2}`, "wj/b": `{"b":"new"}`})
	trim(6, 2)
	wantObjects(t, j, "b's recreation trimmed", map[string]string{"wj/a": `{"a":2}`, "wj/b": `{"b":"new"}`})

	// A MODIFIED without an object (a journal that stored none for it):
	// the older copy is not current any more.
	noObj := ev(journal.Modified, "wj/a", "ua1", "6")
	noObj.Object = nil
	appendEvents(t, j, "6", noObj) // 6
	if _, ok, err := get(t, j, "wj/a"); ok || !errors.Is(err, journal.ErrNoObject) {
		t.Fatalf("Object(wj/a) after an object-less MODIFIED = ok %v, %v; want ErrNoObject", ok, err)
	}
	appendEvents(t, j, "7", obj(journal.Modified, "wj/a", "ua1", "7", `{"a":3}`), ev(journal.Deleted, "wj/b", "ub2", "7")) // 7, 8
	trim(8, 2)
	wantObjects(t, j, "b deleted, its delete retained", map[string]string{"wj/a": `{"a":3}`}, "wj/b")

	// A reopen, then a file rewrite: the same objects.
	if err := j.Close(); err != nil {
		t.Fatal(err)
	}
	dst := filepath.Join(dir, "compacted.db")
	if _, _, err := compactor.CompactFile(path, dst); err != nil {
		t.Fatal(err)
	}
	j = open(t, dst)
	wantObjects(t, j, "after a file rewrite", map[string]string{"wj/a": `{"a":3}`}, "wj/b")
	trim(9, 1)
	wantObjects(t, j, "everything trimmed after the rewrite", map[string]string{"wj/a": `{"a":3}`}, "wj/b")
	appendEvents(t, j, "9", obj(journal.Added, "wj/b", "ub3", "9", `{"b":3}`)) // 9
	wantObjects(t, j, "b recreated after the rewrite", map[string]string{"wj/a": `{"a":3}`, "wj/b": `{"b":3}`})
}

// Ensure that the file check reports an object whose key is not in the
// index, and passes a file that keeps objects through deletes.
func TestJournal_Check_ObjectWithoutIndexEntry(t *testing.T) {
	j := open(t, filepath.Join(t.TempDir(), "j.db"))
	keepObjects(t, j)
	appendEvents(t, j, "2", obj(journal.Added, "wj/a", "u1", "1", `{}`), ev(journal.Deleted, "wj/a", "u1", "2"))
	if rep, err := j.Check(); err != nil || !rep.OK() {
		t.Fatalf("Check = %+v, %v; want no problems", rep, err)
	}
	if err := journal.StoreOf(j).Update(func(tx storage.Tx) error { return tx.ObjectPut([]byte("wj/ghost"), []byte(`{}`)) }); err != nil {
		t.Fatal(err)
	}
	rep, err := j.Check()
	if err != nil || rep.OK() || !strings.Contains(fmt.Sprint(rep.Problems), "wj/ghost") {
		t.Fatalf("Check with a stray object = %+v, %v; want a problem naming wj/ghost", rep, err)
	}
}

// Ensure that an event's old object (ObjectView.Previous) survives the
// trimming of the record at its PrevOffset when that record was no longer
// its key's latest (trimmed after the next MODIFIED was appended), that
// the copy is checked against PrevResourceVersion and UID, and that the
// current object still reads the newest record.
func TestJournal_Objects_PreviousAfterTrim(t *testing.T) {
	j := open(t, filepath.Join(t.TempDir(), "j.db"))
	keepObjects(t, j)
	body := func(rv, d string) string {
		return `{"metadata":{"name":"a","namespace":"wj","uid":"u1","resourceVersion":"` + rv + `"},"data":"` + d + `"}`
	}
	appendEvents(t, j, "4",
		obj(journal.Added, "wj/a", "u1", "1", body("1", "one")),
		obj(journal.Modified, "wj/a", "u1", "2", body("2", "two")),
		obj(journal.Added, "wj/b", "u2", "3", `{"b":1}`),
		obj(journal.Modified, "wj/a", "u1", "4", body("4", "four")))
	evs, err := j.Read(1, 10)
	if err != nil || len(evs) != 4 {
		t.Fatalf("Read = %d events, %v", len(evs), err)
	}
	last := evs[3]
	if last.PrevOffset != 2 {
		t.Fatalf("MODIFIED at 4: PrevOffset %d; want 2", last.PrevOffset)
	}
	// A watch MODIFIED carries no PrevResourceVersion (the copy is then
	// checked by UID and order); a relist's does.
	relisted := last
	relisted.PrevResourceVersion = "2"
	previous := func(e journal.Event) (string, bool) {
		t.Helper()
		var s string
		var ok bool
		err := j.ViewObjects(func(v *journal.ObjectView) error {
			b, found, err := v.Previous(e)
			s, ok = string(b), found
			return err
		})
		if err != nil {
			t.Fatalf("Previous = %v", err)
		}
		return s, ok
	}
	if got, ok := previous(last); !ok || got != body("2", "two") {
		t.Fatalf("Previous before the trim = %q, %v; want the record at 2", got, ok)
	}
	// Trim offsets 1-3: the record at 2 is not wj/a's latest (4 is).
	if n, _, err := j.Writer().Trim(4, 100, 0, 0); err != nil || n != 3 {
		t.Fatalf("Trim = %d, %v; want 3", n, err)
	}
	for _, e := range []journal.Event{last, relisted} {
		if got, ok := previous(e); !ok || got != body("2", "two") {
			t.Fatalf("Previous (PrevResourceVersion %q) after the trim = %q, %v; want the kept copy of the record at 2", e.PrevResourceVersion, got, ok)
		}
	}
	if got, ok, err := get(t, j, "wj/a"); !ok || err != nil || got != body("4", "four") {
		t.Fatalf("Object(wj/a) after the trim = %q, %v, %v; want the latest record's", got, ok, err)
	}
	// A copy of another state, or of another UID, is not returned.
	other := relisted
	other.PrevOffset, other.PrevResourceVersion = 1, "1"
	if got, ok := previous(other); ok {
		t.Errorf("Previous for PrevResourceVersion 1 = %q; want none (the copy is of 2)", got)
	}
	other = last
	other.UID = "u9"
	if got, ok := previous(other); ok {
		t.Errorf("Previous for another UID = %q; want none", got)
	}
	other = last
	other.ResourceVersion = "2"
	if got, ok := previous(other); ok {
		t.Errorf("Previous of an event not newer than the copy = %q; want none", got)
	}
	// A deleted key's copy goes with it.
	appendEvents(t, j, "5", ev(journal.Deleted, "wj/a", "u1", "5"))
	if got, ok := previous(last); ok {
		t.Errorf("Previous after the key's DELETED = %q; want none", got)
	}
	if rep, err := j.Check(); err != nil || len(rep.Problems) > 0 {
		t.Errorf("file check = %v, %v", rep.Problems, err)
	}
}
