package journal_test

import (
	"context"
	"errors"
	"path/filepath"
	"testing"

	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/watchjournal/watchjournal/journal"
)

// After Close, every read and wait reports ErrClosed, an exported
// sentinel that errors.Is matches.
func TestClosed_ErrClosedEverywhere(t *testing.T) {
	path := filepath.Join(t.TempDir(), "j.db")
	j := open(t, path)
	appendEvents(t, j, "1", ev(journal.Added, "wj/a", "u", "1"))
	c, err := j.Consumers().Open("c")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Next(context.Background(), 0); err != nil {
		t.Fatal(err)
	}
	blocked := make(chan error, 1)
	go func() { _, err := c.Next(context.Background(), 0); blocked <- err }()
	_ = j.Close()
	if err := <-blocked; !errors.Is(err, journal.ErrClosed) {
		t.Errorf("Next blocked across Close = %v; want ErrClosed", err)
	}
	if _, err := c.Next(context.Background(), 0); !errors.Is(err, journal.ErrClosed) {
		t.Errorf("Next after Close = %v; want ErrClosed", err)
	}
	if _, err := j.Read(1, 1); !errors.Is(err, journal.ErrClosed) {
		t.Errorf("Read after Close = %v; want ErrClosed", err)
	}
	if err := c.Commit(1); !errors.Is(err, journal.ErrClosed) {
		t.Errorf("Commit after Close = %v; want ErrClosed", err)
	}
	if err := j.Wait(context.Background(), 5); !errors.Is(err, journal.ErrClosed) {
		t.Errorf("Wait after Close = %v; want ErrClosed", err)
	}
}

// max 0 is DefaultBatch, a negative max is ErrBadMax, the same for Read,
// TryNext and Next (TryNext(0) and TryNext(-1) each returned one event).
func TestMax_ZeroIsDefaultNegativeIsError(t *testing.T) {
	j := open(t, filepath.Join(t.TempDir(), "j.db"))
	var evs []journal.Event
	for i := 0; i < journal.DefaultBatch+5; i++ {
		evs = append(evs, ev(journal.Added, "wj/k"+string(rune('a'+i/26))+string(rune('a'+i%26)), "u", "1"))
	}
	appendEvents(t, j, "1", evs...)
	if got, err := j.Read(1, 0); err != nil || len(got) != journal.DefaultBatch {
		t.Errorf("Read(1, 0) = %d events, %v; want %d", len(got), err, journal.DefaultBatch)
	}
	if _, err := j.Read(1, -1); !errors.Is(err, journal.ErrBadMax) {
		t.Errorf("Read(1, -1) = %v; want ErrBadMax", err)
	}
	c, _ := j.Consumers().Open("c")
	if got, err := c.TryNext(0); err != nil || len(got) != journal.DefaultBatch {
		t.Errorf("TryNext(0) = %d events, %v; want %d", len(got), err, journal.DefaultBatch)
	}
	if got, err := c.TryNext(-1); !errors.Is(err, journal.ErrBadMax) || len(got) != 0 {
		t.Errorf("TryNext(-1) = %d events, %v; want ErrBadMax", len(got), err)
	}
	if _, err := c.Next(context.Background(), -1); !errors.Is(err, journal.ErrBadMax) {
		t.Errorf("Next(-1) = %v; want ErrBadMax", err)
	}
	if got, err := c.Next(context.Background(), 0); err != nil || len(got) != 5 {
		t.Errorf("Next(0) = %d events, %v; want the 5 left", len(got), err)
	}
}

// Commit(2) after Commit(4) is ErrCommitBackwards and keeps 4; Reset
// rewinds on purpose and moves the read position.
func TestCommit_BackwardsRejected_ResetRewinds(t *testing.T) {
	j := open(t, filepath.Join(t.TempDir(), "j.db"))
	for _, k := range []string{"a", "b", "c", "d", "e"} {
		appendEvents(t, j, "1", ev(journal.Added, "wj/"+k, "u", "1"))
	}
	c, _ := j.Consumers().Open("c")
	if err := c.Commit(4); err != nil {
		t.Fatal(err)
	}
	if err := c.Commit(4); err != nil {
		t.Errorf("Commit(4) again = %v; want nil (no-op)", err)
	}
	if err := c.Commit(2); !errors.Is(err, journal.ErrCommitBackwards) {
		t.Errorf("Commit(2) after Commit(4) = %v; want ErrCommitBackwards", err)
	}
	if off, _ := c.Committed(); off != 4 {
		t.Errorf("committed = %d after a backwards commit; want 4", off)
	}
	if err := c.Reset(2); err != nil {
		t.Fatal(err)
	}
	if off, _ := c.Committed(); off != 2 || c.Position() != 3 {
		t.Errorf("after Reset(2): committed %d, position %d; want 2, 3", off, c.Position())
	}
	if err := c.Reset(9); !errors.Is(err, journal.ErrOffsetRange) {
		t.Errorf("Reset(9) past head 5 = %v; want ErrOffsetRange", err)
	}
}

// Append keeps the per-key guarantee of journal/doc.go: DELETED or MODIFIED
// for an absent key and ADDED for a present key are *KeyStateError; an empty
// Origin is ErrBadEvent. Nothing of a rejected event is stored.
func TestAppend_RejectsEventsAgainstTheIndex(t *testing.T) {
	j := open(t, filepath.Join(t.TempDir(), "j.db"))
	appendEvents(t, j, "1", ev(journal.Added, "wj/a", "u1", "1"))
	noOrigin := ev(journal.Added, "wj/b", "u", "2")
	noOrigin.Origin = ""
	for _, tc := range []struct {
		e    journal.Event
		want error
	}{
		{ev(journal.Deleted, "wj/absent", "u", "2"), journal.ErrKeyState},
		{ev(journal.Modified, "wj/absent", "u", "2"), journal.ErrKeyState},
		{ev(journal.Added, "wj/a", "u2", "2"), journal.ErrKeyState},
		{noOrigin, journal.ErrBadEvent},
		{ev("BOOKMARK", "wj/a", "u", "2"), journal.ErrBadEvent},
	} {
		err := j.Writer().Update(func(tx *journal.Tx) error { _, err := tx.Append(&tc.e); return err })
		if !errors.Is(err, tc.want) {
			t.Errorf("Append(%s %s origin %q) = %v; want %v", tc.e.Type, tc.e.Key, tc.e.Origin, err, tc.want)
		}
	}
	var kse *journal.KeyStateError
	e := ev(journal.Added, "wj/a", "u2", "2")
	if err := j.Writer().Update(func(tx *journal.Tx) error { _, err := tx.Append(&e); return err }); !errors.As(err, &kse) || !kse.Present || kse.UID != "u1" {
		t.Errorf("ADDED for present key: %#v; want a KeyStateError with Present and UID u1", kse)
	}
	if head, _ := j.Head(); head != 1 {
		t.Errorf("head = %d after rejected appends; want 1", head)
	}
	// The right sequence still goes through.
	appendEvents(t, j, "3", ev(journal.Modified, "wj/a", "u1", "2"), ev(journal.Deleted, "wj/a", "u1", "3"), ev(journal.Added, "wj/a", "u2", "3"))
}

// Kind and apiVersion are recorded in the file's meta without being part of
// its identity: an Open without them matches a file with them, an Open with
// them fills a file without them, and TypeMeta reads an old file's kind from
// its first stored object.
func TestResource_KindRecordedNotIdentity(t *testing.T) {
	path := filepath.Join(t.TempDir(), "j.db")
	res := journal.Resource{GVR: schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}, Namespace: "wj"}
	j, err := journal.Open(path, &journal.Options{Resource: &res, NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := j.TypeMeta(); !errors.Is(err, journal.ErrNoKind) {
		t.Errorf("TypeMeta of an empty old-style file = %v; want ErrNoKind", err)
	}
	e := ev(journal.Added, "wj/a", "u", "1")
	e.Object = []byte(`{"kind":"ConfigMap","apiVersion":"v1","metadata":{"name":"a"}}`)
	appendEvents(t, j, "1", e)
	if k, v, err := j.TypeMeta(); err != nil || k != "ConfigMap" || v != "v1" {
		t.Errorf("TypeMeta of an old-style file = %q %q %v; want ConfigMap v1 from its object", k, v, err)
	}
	_ = j.Close()

	withKind := res
	withKind.Kind, withKind.APIVersion = "ConfigMap", "v1"
	j, err = journal.Open(path, &journal.Options{Resource: &withKind, NoSync: true})
	if err != nil {
		t.Fatalf("Open with kind of a file without = %v", err)
	}
	if r, _, _ := j.Resource(); r.Kind != "ConfigMap" || r.APIVersion != "v1" {
		t.Errorf("recorded resource = %+v; want kind filled", r)
	}
	_ = j.Close()
	j, err = journal.Open(path, &journal.Options{Resource: &res, NoSync: true})
	if err != nil {
		t.Fatalf("Open without kind of a file with = %v", err)
	}
	defer j.Close()
	if err := j.Writer().SetKind("Other", "v9"); err != nil {
		t.Fatal(err)
	}
	if r, _, _ := j.Resource(); r.Kind != "ConfigMap" {
		t.Errorf("SetKind replaced a recorded kind: %+v", r)
	}
	other := res
	other.Namespace = "x"
	_ = j.Close()
	if _, err := journal.Open(path, &journal.Options{Resource: &other, NoSync: true}); !errors.Is(err, journal.ErrResourceMismatch) {
		t.Errorf("Open of another namespace = %v; want ErrResourceMismatch", err)
	}
}
