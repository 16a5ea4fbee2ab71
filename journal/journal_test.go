package journal_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	bbolt "go.etcd.io/bbolt"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/watchjournal/watchjournal/journal"
)

var cm = journal.Resource{GVR: schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}, Namespace: "wj"}

func open(t *testing.T, path string) *journal.Journal {
	t.Helper()
	j, err := journal.Open(path, &journal.Options{Resource: &cm, NoSync: true})
	if err != nil {
		t.Fatalf("Open(%s) = %v", path, err)
	}
	t.Cleanup(func() { _ = j.Close() })
	return j
}

func appendEvents(t *testing.T, j *journal.Journal, rv string, evs ...journal.Event) {
	t.Helper()
	err := j.Writer().Update(func(tx *journal.Tx) error {
		for i := range evs {
			if _, err := tx.Append(&evs[i]); err != nil {
				return err
			}
		}
		return tx.SetResourceVersion(rv)
	})
	if err != nil {
		t.Fatalf("Update = %v", err)
	}
}

func ev(typ journal.EventType, key, uid, rv string) journal.Event {
	return journal.Event{Type: typ, Key: key, UID: uid, ResourceVersion: rv, Origin: journal.OriginWatch, Object: []byte(`{}`)}
}

func TestJournal_Append_IndexJournalAndRVTogether(t *testing.T) {
	j := open(t, filepath.Join(t.TempDir(), "j.db"))
	appendEvents(t, j, "12",
		ev(journal.Added, "wj/a", "u1", "10"),
		ev(journal.Added, "wj/b", "u2", "11"),
		ev(journal.Deleted, "wj/a", "u1", "12"))

	evs, err := j.Read(1, 100)
	if err != nil {
		t.Fatal(err)
	}
	if len(evs) != 3 || evs[0].Offset != 1 || evs[2].Offset != 3 || evs[2].Type != journal.Deleted {
		t.Fatalf("Read(1) = %+v; want offsets 1..3 ending in DELETED", evs)
	}
	if _, ok, _ := j.Lookup("wj/a"); ok {
		t.Errorf("Lookup(wj/a) found a deleted key")
	}
	if e, ok, _ := j.Lookup("wj/b"); !ok || e.UID != "u2" || e.ResourceVersion != "11" {
		t.Errorf("Lookup(wj/b) = %+v, %v; want u2 at 11", e, ok)
	}
	st, _ := j.Stats()
	if st.Objects != 1 || st.FirstOffset != 1 || st.LastOffset != 3 || st.ResourceVersion != "12" {
		t.Errorf("Stats() = %+v; want 1 object, offsets 1..3, rv 12", st)
	}
}

func TestJournal_Update_ErrorChangesNothing(t *testing.T) {
	j := open(t, filepath.Join(t.TempDir(), "j.db"))
	boom := errors.New("boom")
	err := j.Writer().Update(func(tx *journal.Tx) error {
		e := ev(journal.Added, "wj/a", "u1", "10")
		if _, err := tx.Append(&e); err != nil {
			return err
		}
		_ = tx.SetResourceVersion("10")
		return boom
	})
	if !errors.Is(err, boom) {
		t.Fatalf("Update = %v; want boom", err)
	}
	st, _ := j.Stats()
	if st.Objects != 0 || st.LastOffset != 0 || st.ResourceVersion != "" {
		t.Fatalf("Stats() after a failed Update = %+v; want empty", st)
	}
}

func TestJournal_Reopen_KeepsOffsetsMonotonic(t *testing.T) {
	path := filepath.Join(t.TempDir(), "j.db")
	j, err := journal.Open(path, &journal.Options{Resource: &cm})
	if err != nil {
		t.Fatal(err)
	}
	appendEvents(t, j, "1", ev(journal.Added, "wj/a", "u1", "1"))
	_ = j.Close()
	j = open(t, path)
	appendEvents(t, j, "2", ev(journal.Modified, "wj/a", "u1", "2"))
	evs, _ := j.Read(0, 10)
	if len(evs) != 2 || evs[1].Offset != 2 {
		t.Fatalf("Read(0) after reopen = %+v; want offsets 1, 2", evs)
	}
	if rv, _ := j.ResourceVersion(); rv != "2" {
		t.Errorf("ResourceVersion() = %q; want 2", rv)
	}
}

func TestOpen_Errors(t *testing.T) {
	dir := t.TempDir()

	t.Run("a second writer gets ErrLocked instead of hanging", func(t *testing.T) {
		path := filepath.Join(dir, "locked.db")
		open(t, path)
		start := time.Now()
		_, err := journal.Open(path, &journal.Options{Timeout: 100 * time.Millisecond})
		if !errors.Is(err, journal.ErrLocked) {
			t.Fatalf("second Open = %v; want ErrLocked", err)
		}
		if time.Since(start) > 5*time.Second {
			t.Errorf("second Open took %v", time.Since(start))
		}
	})
	t.Run("garbage bytes are ErrCorrupt", func(t *testing.T) {
		path := filepath.Join(dir, "garbage.db")
		b := make([]byte, 64<<10)
		for i := range b {
			b[i] = byte(i*7 + 3)
		}
		_ = os.WriteFile(path, b, 0o600)
		_, err := journal.Open(path, nil)
		if !errors.Is(err, journal.ErrCorrupt) {
			t.Fatalf("Open(garbage) = %v; want ErrCorrupt", err)
		}
		if got, _ := os.ReadFile(path); len(got) != len(b) {
			t.Errorf("Open(garbage) changed the file")
		}
	})
	t.Run("another program's bbolt file is ErrForeign", func(t *testing.T) {
		path := filepath.Join(dir, "foreign.db")
		db, err := bbolt.Open(path, 0o600, nil)
		if err != nil {
			t.Fatal(err)
		}
		_ = db.Update(func(tx *bbolt.Tx) error { _, err := tx.CreateBucket([]byte("theirs")); return err })
		_ = db.Close()
		_, err = journal.Open(path, nil)
		if !errors.Is(err, journal.ErrForeign) {
			t.Fatalf("Open(foreign) = %v; want ErrForeign", err)
		}
	})
	t.Run("a newer schema is ErrNewerSchema", func(t *testing.T) {
		path := filepath.Join(dir, "newer.db")
		j, _ := journal.Open(path, nil)
		_ = j.Close()
		db, _ := bbolt.Open(path, 0o600, nil)
		_ = db.Update(func(tx *bbolt.Tx) error { return tx.Bucket([]byte("meta")).Put([]byte("schema"), []byte{0, 0, 0, 99}) })
		_ = db.Close()
		_, err := journal.Open(path, nil)
		if !errors.Is(err, journal.ErrNewerSchema) {
			t.Fatalf("Open(newer) = %v; want ErrNewerSchema", err)
		}
	})
	t.Run("a read-only open of a missing file is ErrNotExist and creates nothing", func(t *testing.T) {
		path := filepath.Join(dir, "missing.db")
		_, err := journal.Open(path, &journal.Options{ReadOnly: true})
		if !errors.Is(err, journal.ErrNotExist) {
			t.Fatalf("Open(missing, ReadOnly) = %v; want ErrNotExist", err)
		}
		if _, err := os.Stat(path); err == nil {
			t.Errorf("read-only Open created %s", path)
		}
	})
	t.Run("another resource is ErrResourceMismatch", func(t *testing.T) {
		path := filepath.Join(dir, "res.db")
		j, _ := journal.Open(path, &journal.Options{Resource: &cm})
		_ = j.Close()
		other := cm
		other.Namespace = "elsewhere"
		_, err := journal.Open(path, &journal.Options{Resource: &other})
		if !errors.Is(err, journal.ErrResourceMismatch) {
			t.Fatalf("Open(other resource) = %v; want ErrResourceMismatch", err)
		}
	})
	t.Run("the file is created with mode 0600", func(t *testing.T) {
		path := filepath.Join(dir, "mode.db")
		j, _ := journal.Open(path, nil)
		_ = j.Close()
		fi, err := os.Stat(path)
		if err != nil || fi.Mode().Perm() != 0o600 {
			t.Fatalf("mode = %v, %v; want 0600", fi.Mode(), err)
		}
	})
}

func TestRelist_AbortChangesNothing(t *testing.T) {
	j := open(t, filepath.Join(t.TempDir(), "j.db"))
	appendEvents(t, j, "5", ev(journal.Added, "wj/a", "u1", "5"))
	rel, err := j.Writer().BeginRelist()
	if err != nil {
		t.Fatal(err)
	}
	if err := rel.Stage([]journal.Event{{Type: journal.Deleted, Key: "wj/a", UID: "u1", ResourceVersion: "5", Origin: journal.OriginRelist}}); err != nil {
		t.Fatal(err)
	}
	_ = rel.Abort()
	st, _ := j.Stats()
	if st.Objects != 1 || st.LastOffset != 1 || st.ResourceVersion != "5" {
		t.Fatalf("Stats() after Abort = %+v; want unchanged (1 object, offset 1, rv 5)", st)
	}
}

func TestRelist_CommitAppliesInOrder(t *testing.T) {
	j := open(t, filepath.Join(t.TempDir(), "j.db"))
	appendEvents(t, j, "5", ev(journal.Added, "wj/a", "u1", "5"))
	rel, _ := j.Writer().BeginRelist()
	var staged []journal.Event
	for i := 0; i < 2500; i++ { // more than one commit chunk
		key := "wj/n" + string(rune('a'+i%26)) + string(rune('a'+i/26%26)) + string(rune('a'+i/676))
		staged = append(staged, journal.Event{Type: journal.Added, Key: key, UID: "x", ResourceVersion: "9", Origin: journal.OriginRelist})
	}
	staged = append(staged, journal.Event{Type: journal.Deleted, Key: "wj/a", UID: "u1", ResourceVersion: "5", Origin: journal.OriginRelist})
	if err := rel.Stage(staged); err != nil {
		t.Fatal(err)
	}
	first, last, err := rel.Commit("9")
	if err != nil || first != 2 || last != 2502 {
		t.Fatalf("Commit = %d, %d, %v; want 2, 2502", first, last, err)
	}
	st, _ := j.Stats()
	if st.Objects != 2500 || st.ResourceVersion != "9" {
		t.Fatalf("Stats() = %+v; want 2500 objects at rv 9", st)
	}
	evs, _ := j.Read(2502, 1)
	if len(evs) != 1 || evs[0].Type != journal.Deleted || !evs[0].Synthesized() {
		t.Fatalf("Read(2502) = %+v; want the synthesized DELETED last", evs)
	}
}

func TestJournal_Wait_WokenByAppend(t *testing.T) {
	j := open(t, filepath.Join(t.TempDir(), "j.db"))
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- j.Wait(ctx, 0) }()
	appendEvents(t, j, "1", ev(journal.Added, "wj/a", "u1", "1"))
	if err := <-done; err != nil {
		t.Fatalf("Wait(0) = %v; want nil after an append", err)
	}
	short, cancel2 := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel2()
	if err := j.Wait(short, 1); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Wait(1) at the head = %v; want DeadlineExceeded", err)
	}
}

// A read of large events stops after about 4 MiB, whatever max asks, and
// reading on from there returns every event once, in order.
func TestJournal_Read_BoundedByBytes(t *testing.T) {
	j := open(t, filepath.Join(t.TempDir(), "j.db"))
	obj := []byte(`{"data":"` + strings.Repeat("x", 900<<10) + `"}`)
	var evs []journal.Event
	for i := range 20 {
		e := ev(journal.Added, fmt.Sprintf("wj/big-%02d", i), "u", "1")
		e.Object = obj
		evs = append(evs, e)
	}
	appendEvents(t, j, "1", evs...)

	first, err := j.Read(0, 1000)
	if err != nil || len(first) == 0 || len(first) > 5 {
		t.Fatalf("Read(0, 1000) = %d events, %v; want 1 to 5 (4 MiB of 900 KiB events)", len(first), err)
	}
	var got []uint64
	for next := uint64(1); ; {
		page, err := j.Read(next, 1000)
		if err != nil {
			t.Fatal(err)
		}
		if len(page) == 0 {
			break
		}
		for _, e := range page {
			got = append(got, e.Offset)
		}
		next = page[len(page)-1].Offset + 1
	}
	if len(got) != 20 || got[0] != 1 || got[19] != 20 {
		t.Fatalf("offsets read page by page = %v; want 1..20", got)
	}
}
