package journal_test

import (
	"context"
	"encoding/json"
	"errors"
	"path/filepath"
	"slices"
	"testing"

	"github.com/watchjournal/watchjournal/journal"
	"github.com/watchjournal/watchjournal/journal/compactor"
)

// color is an index function: the object's "color" field, none when unset.
func color(calls *int) journal.IndexFunc {
	return func(b []byte) ([]string, error) {
		if calls != nil {
			*calls++
		}
		var o struct {
			Color string `json:"color"`
			Bad   bool   `json:"bad"`
		}
		if err := json.Unmarshal(b, &o); err != nil {
			return nil, err
		}
		if o.Bad {
			return nil, errors.New("bad object")
		}
		if o.Color == "" {
			return nil, nil
		}
		return []string{o.Color, "any"}, nil
	}
}

// withIndex registers color and reindexes it, and returns what the
// reindex did.
func withIndex(t *testing.T, j *journal.Journal, calls *int) journal.ReindexStats {
	t.Helper()
	return withIndexFunc(t, j, color(calls))
}

func withIndexFunc(t *testing.T, j *journal.Journal, fn journal.IndexFunc) journal.ReindexStats {
	t.Helper()
	keepObjects(t, j)
	if err := j.Indexes().Add(map[string]journal.IndexFunc{"color": fn}); err != nil {
		t.Fatal(err)
	}
	st, err := j.Indexes().Reindex(context.Background(), []string{"color"})
	if err != nil {
		t.Fatalf("Reindex = %+v, %v", st, err)
	}
	return st
}

// wantIndex checks the keys of value (Indexes.Lookup) and that the view's
// Lookup gives the same keys with their current objects.
func wantIndex(t *testing.T, j *journal.Journal, value string, want ...string) {
	t.Helper()
	got, err := j.Indexes().Lookup("color", value)
	if err != nil || !slices.Equal(got, want) {
		t.Fatalf("Indexes.Lookup(color, %q) = %q, %v; want %q", value, got, err, want)
	}
	var viewed []string
	err = j.ViewObjects(func(v *journal.ObjectView) error {
		return v.Lookup("color", value, func(k string, obj []byte) (bool, error) {
			vals, err := color(nil)(obj)
			if err != nil || !slices.Contains(vals, value) {
				t.Errorf("Lookup(color, %q) gave %s with object %s (values %q, %v)", value, k, obj, vals, err)
			}
			viewed = append(viewed, k)
			return true, nil
		})
	})
	if err != nil || !slices.Equal(viewed, want) {
		t.Fatalf("ObjectView.Lookup(color, %q) keys = %q, %v; want %q", value, viewed, err, want)
	}
}

// Ensure that the index follows ADDED, MODIFIED and DELETED appends and an
// object-less event, and a value that holds a "/" or a NUL stays apart
// from the key after it.
func TestIndexes_FollowAppends(t *testing.T) {
	j := open(t, filepath.Join(t.TempDir(), "j.db"))
	withIndex(t, j, nil)
	appendEvents(t, j, "3",
		obj(journal.Added, "wj/a", "u1", "1", `{"color":"red"}`),
		obj(journal.Added, "wj/b", "u2", "2", `{"color":"blue"}`),
		obj(journal.Added, "wj/c", "u3", "3", `{"color":"red"}`),
		obj(journal.Added, "wj/d", "u4", "3", `{}`),
		obj(journal.Added, "wj/e", "u5", "3", `{"color":"re\u0000d/x"}`))
	wantIndex(t, j, "red", "wj/a", "wj/c")
	wantIndex(t, j, "blue", "wj/b")
	wantIndex(t, j, "re\x00d/x", "wj/e")
	wantIndex(t, j, "re")
	wantIndex(t, j, "any", "wj/a", "wj/b", "wj/c", "wj/e")

	appendEvents(t, j, "5",
		obj(journal.Modified, "wj/a", "u1", "4", `{"color":"blue"}`),
		ev(journal.Deleted, "wj/b", "u2", "5"),
		obj(journal.Modified, "wj/d", "u4", "5", `{"color":"red"}`))
	wantIndex(t, j, "red", "wj/c", "wj/d")
	wantIndex(t, j, "blue", "wj/a")
	// A MODIFIED without an object removes the key from the index.
	noObj := ev(journal.Modified, "wj/c", "u3", "6")
	noObj.Object = nil
	appendEvents(t, j, "6", noObj)
	wantIndex(t, j, "red", "wj/d")
	if _, err := j.Indexes().Lookup("size", "1"); !errors.Is(err, journal.ErrNoIndex) {
		t.Fatalf("Indexes.Lookup(size) = %v; want ErrNoIndex", err)
	}
}

// Ensure that a relist moves the index with its events, tombstones
// included, and that a first list into an empty index (direct mode)
// indexes what it appends.
func TestIndexes_FollowRelists(t *testing.T) {
	j := open(t, filepath.Join(t.TempDir(), "j.db"))
	withIndex(t, j, nil)
	relist := func(rv string, evs ...journal.Event) {
		t.Helper()
		r, err := j.Writer().BeginRelist()
		if err != nil {
			t.Fatal(err)
		}
		for i := range evs {
			evs[i].Origin = journal.OriginRelist
		}
		if err := r.Stage(evs); err != nil {
			t.Fatal(err)
		}
		if _, _, err := r.Commit(rv); err != nil {
			t.Fatal(err)
		}
	}
	relist("2",
		obj(journal.Added, "wj/a", "u1", "1", `{"color":"red"}`),
		obj(journal.Added, "wj/b", "u2", "2", `{"color":"red"}`))
	wantIndex(t, j, "red", "wj/a", "wj/b")

	tomb := ev(journal.Deleted, "wj/a", "u1", "1")
	tomb.Object = nil
	relist("5", tomb,
		obj(journal.Modified, "wj/b", "u2", "4", `{"color":"blue"}`),
		obj(journal.Added, "wj/c", "u3", "5", `{"color":"red"}`))
	wantIndex(t, j, "red", "wj/c")
	wantIndex(t, j, "blue", "wj/b")
	if r, err := j.Check(); err != nil || !r.OK() {
		t.Fatalf("Check after the relists = %+v, %v; want sound", r, err)
	}
}

// Ensure that the index commits with the object or not at all: a write
// transaction that fails after its appends leaves both as they were, and
// an index function's error fails the write whole (ErrIndexFunc).
func TestIndexes_SameTransaction(t *testing.T) {
	j := open(t, filepath.Join(t.TempDir(), "j.db"))
	withIndex(t, j, nil)
	appendEvents(t, j, "1", obj(journal.Added, "wj/a", "u1", "1", `{"color":"red"}`))

	abort := errors.New("abort")
	err := j.Writer().Update(func(tx *journal.Tx) error {
		m := obj(journal.Modified, "wj/a", "u1", "2", `{"color":"blue"}`)
		if _, err := tx.Append(&m); err != nil {
			return err
		}
		b := obj(journal.Added, "wj/b", "u2", "2", `{"color":"blue"}`)
		if _, err := tx.Append(&b); err != nil {
			return err
		}
		return abort
	})
	if !errors.Is(err, abort) {
		t.Fatalf("Update = %v; want abort", err)
	}
	wantIndex(t, j, "red", "wj/a")
	wantIndex(t, j, "blue")
	if got, _, _ := get(t, j, "wj/a"); got != `{"color":"red"}` {
		t.Fatalf("object of wj/a = %s after the abort", got)
	}

	err = j.Writer().Update(func(tx *journal.Tx) error {
		m := obj(journal.Modified, "wj/a", "u1", "3", `{"color":"blue","bad":true}`)
		_, err := tx.Append(&m)
		return err
	})
	if !errors.Is(err, journal.ErrIndexFunc) {
		t.Fatalf("Update with a failing index function = %v; want ErrIndexFunc", err)
	}
	wantIndex(t, j, "red", "wj/a")
	if got, _, _ := get(t, j, "wj/a"); got != `{"color":"red"}` {
		t.Fatalf("object of wj/a = %s after the failed write", got)
	}
}

// Ensure that a name registered for the first time on a file with objects
// is built from them by its reindex, that a restart registering the
// same name reindexes it and rewrites nothing, and that a write made
// without the name registered drops it (it would be stale), so the next
// registration builds it again.
func TestIndexes_BackfillRestartDrop(t *testing.T) {
	path := filepath.Join(t.TempDir(), "j.db")
	j := open(t, path)
	keepObjects(t, j)
	appendEvents(t, j, "3",
		obj(journal.Added, "wj/a", "u1", "1", `{"color":"red"}`),
		obj(journal.Added, "wj/b", "u2", "2", `{"color":"blue"}`),
		obj(journal.Modified, "wj/a", "u1", "3", `{"color":"blue"}`))
	// Trim every event: the backfill reads the objects' kept copies too.
	if n, _, err := j.Writer().Trim(4, 100, 0, 0); err != nil || n != 3 {
		t.Fatalf("Trim = %d, %v; want the 3 events", n, err)
	}
	appendEvents(t, j, "4", obj(journal.Added, "wj/c", "u3", "4", `{"color":"red"}`))
	calls := 0
	if st := withIndex(t, j, &calls); calls != 3 || st.Rewritten != 3 {
		t.Fatalf("backfill called the index function %d times and rewrote %d keys; want 3 and 3 (one per live object)", calls, st.Rewritten)
	}
	wantIndex(t, j, "blue", "wj/a", "wj/b")
	wantIndex(t, j, "red", "wj/c")
	if err := j.Close(); err != nil {
		t.Fatal(err)
	}

	// Restart: the same name, not built again; writes keep it current.
	j = open(t, path)
	calls = 0
	if st := withIndex(t, j, &calls); calls != 3 || st.Rewritten != 0 || st.Transactions != 0 {
		t.Fatalf("re-registering a recorded index: %d calls, %+v; want 3 calls (one per live object) and nothing rewritten", calls, st)
	}
	appendEvents(t, j, "5", obj(journal.Modified, "wj/b", "u2", "5", `{"color":"red"}`))
	wantIndex(t, j, "red", "wj/b", "wj/c")
	if err := j.Close(); err != nil {
		t.Fatal(err)
	}

	// A writer without the index: its write drops it.
	j = open(t, path)
	appendEvents(t, j, "6", obj(journal.Modified, "wj/c", "u3", "6", `{"color":"blue"}`))
	if names, err := j.Indexes().Names(); err != nil || len(names) != 0 {
		t.Fatalf("Indexes() after a write without the index = %q, %v; want none", names, err)
	}
	if _, err := j.Indexes().Lookup("color", "red"); !errors.Is(err, journal.ErrNoIndex) {
		t.Fatalf("Indexes.Lookup of a dropped index = %v; want ErrNoIndex", err)
	}
	calls = 0
	if st := withIndex(t, j, &calls); calls != 3 || st.Rewritten != 3 {
		t.Fatalf("re-registering a dropped index: %d calls, %+v; want 3 calls and 3 keys rewritten", calls, st)
	}
	wantIndex(t, j, "red", "wj/b")
	wantIndex(t, j, "blue", "wj/a", "wj/c")
	if names, err := j.Indexes().Names(); err != nil || !slices.Equal(names, []string{"color"}) {
		t.Fatalf("Indexes() = %q, %v; want [color]", names, err)
	}
	if r, err := j.Check(); err != nil || !r.OK() {
		t.Fatalf("Check after the rebuild = %+v, %v; want sound", r, err)
	}
}

// Ensure that the file check passes over kept indexes, that Indexes.Values
// lists each value once, and that a file rewrite (journalctl compact)
// keeps the index and its record.
func TestIndexes_CheckValuesRewrite(t *testing.T) {
	path := filepath.Join(t.TempDir(), "j.db")
	j := open(t, path)
	withIndex(t, j, nil)
	appendEvents(t, j, "3",
		obj(journal.Added, "wj/a", "u1", "1", `{"color":"red"}`),
		obj(journal.Added, "wj/b", "u2", "2", `{"color":"blue"}`),
		obj(journal.Added, "wj/c", "u3", "3", `{"color":"red"}`))
	appendEvents(t, j, "4", ev(journal.Deleted, "wj/b", "u2", "4"))
	if vals, err := j.Indexes().Values("color"); err != nil || !slices.Equal(vals, []string{"any", "red"}) {
		t.Fatalf("Indexes.Values(color) = %q, %v; want [any red]", vals, err)
	}
	if r, err := j.Check(); err != nil || !r.OK() {
		t.Fatalf("Check = %+v, %v; want sound", r, err)
	}
	if err := j.Close(); err != nil {
		t.Fatal(err)
	}
	if _, _, err := compactor.Rewrite(path, nil); err != nil {
		t.Fatal(err)
	}
	j = open(t, path)
	if st := withIndex(t, j, nil); st.Rewritten != 0 {
		t.Fatalf("the rewritten file's index was rewritten by its reindex: %+v", st)
	}
	wantIndex(t, j, "red", "wj/a", "wj/c")
	wantIndex(t, j, "blue")
}
