package journal_test

import (
	"bytes"
	"encoding/json"
	"path/filepath"
	"testing"

	"github.com/watchjournal/watchjournal/journal"
)

// A tombstone (a DELETED without an object: a relist's inferred deletion,
// or a watch's for a UID the server no longer has) in a file that keeps
// objects is stored with the key's last stored object, read in the
// transaction that stores the DELETED: the final state survives retention
// trimming of every record of the key, as an informer's
// DeletedFinalStateUnknown.Obj holds the last known state.

// tombstoneOf returns the DELETED at the head of j (its last event).
func tombstoneOf(t *testing.T, j *journal.Journal) journal.Event {
	t.Helper()
	head, err := j.Head()
	if err != nil {
		t.Fatal(err)
	}
	evs, err := j.Read(head, 1)
	if err != nil || len(evs) != 1 || evs[0].Type != journal.Deleted {
		t.Fatalf("Read(head %d) = %+v, %v; want the DELETED", head, evs, err)
	}
	return evs[0]
}

// checkFile fails unless the offline file check finds nothing.
func checkFile(t *testing.T, j *journal.Journal) {
	t.Helper()
	r, err := j.Check()
	if err != nil || !r.OK() {
		t.Fatalf("Check = %+v, %v; want no problem", r, err)
	}
}

// relistDrop commits a relist at rv that stages only a tombstone for the
// key of the index entry (key, uid, rv of the entry).
func relistDrop(t *testing.T, j *journal.Journal, key, uid, entryRV, rv string) {
	t.Helper()
	r, err := j.Writer().BeginRelist()
	if err != nil {
		t.Fatal(err)
	}
	tomb := journal.Event{Type: journal.Deleted, Key: key, UID: uid, ResourceVersion: entryRV, Origin: journal.OriginRestart}
	if err := r.Stage([]journal.Event{tomb}); err != nil {
		t.Fatal(err)
	}
	if _, _, err := r.Commit(rv); err != nil {
		t.Fatal(err)
	}
}

// Ensure that a relist dropping a key whose records retention trimmed
// stores its DELETED with the key's last object (the objects bucket's
// copy), with PrevOffset at the trimmed record, and that it reads so after
// a reopen; the key reads absent and the file checks clean.
func TestJournal_Tombstone_RelistAfterTrimCarriesLastObject(t *testing.T) {
	path := filepath.Join(t.TempDir(), "j.db")
	j := open(t, path)
	keepObjects(t, j)
	appendEvents(t, j, "3",
		obj(journal.Added, "wj/a", "u1", "1", `{"a":1}`),
		obj(journal.Modified, "wj/a", "u1", "2", `{"a":2,"labels":{"x":"y"}}`),
		obj(journal.Added, "wj/b", "u2", "3", `{"b":1}`))
	if n, _, err := j.Writer().Trim(4, 100, 0, 0); err != nil || n != 3 {
		t.Fatalf("Trim = %d, %v; want the 3 events", n, err)
	}
	relistDrop(t, j, "wj/a", "u1", "2", "9")
	e := tombstoneOf(t, j)
	if string(e.Object) != `{"a":2,"labels":{"x":"y"}}` || e.PrevOffset != 2 || e.UID != "u1" || e.ResourceVersion != "2" ||
		e.Origin != journal.OriginRestart || !e.Synthesized() {
		t.Fatalf("relist DELETED = %+v (object %s); want the last object {\"a\":2,...}, PrevOffset 2, uid u1, rv 2, origin restart", e, e.Object)
	}
	if _, ok, err := get(t, j, "wj/a"); ok || err != nil {
		t.Fatalf("Object(wj/a) after its tombstone = ok %v, %v; want absent", ok, err)
	}
	if err := j.Close(); err != nil {
		t.Fatal(err)
	}
	j = open(t, path)
	if e := tombstoneOf(t, j); string(e.Object) != `{"a":2,"labels":{"x":"y"}}` {
		t.Fatalf("after reopen: DELETED object = %s; want the last object", e.Object)
	}
	if got, ok, err := get(t, j, "wj/b"); got != `{"b":1}` || !ok || err != nil {
		t.Fatalf("Object(wj/b) = %q, %v, %v; want it kept", got, ok, err)
	}
	checkFile(t, j)
}

// Ensure that a tombstone appended through Tx.Append (the watch's DELETED
// of an indexed UID the server no longer has) is stored with the key's
// last object from its retained record, that the caller's Event keeps its
// own (nil) Object, and that a DELETED served with an object keeps that
// object, not the stored one.
func TestJournal_Tombstone_AppendCarriesLastObject(t *testing.T) {
	j := open(t, filepath.Join(t.TempDir(), "j.db"))
	keepObjects(t, j)
	appendEvents(t, j, "2",
		obj(journal.Added, "wj/a", "u1", "1", `{"a":1}`),
		obj(journal.Added, "wj/b", "u2", "2", `{"b":1}`))
	tomb := journal.Event{Type: journal.Deleted, Key: "wj/a", UID: "u1", ResourceVersion: "1", Origin: journal.OriginWatch, Reason: journal.ReasonGone}
	appendEvents(t, j, "5", tomb)
	if e := tombstoneOf(t, j); string(e.Object) != `{"a":1}` || e.PrevOffset != 1 || e.Reason != journal.ReasonGone {
		t.Fatalf("tombstone = %+v (object %s); want the last object {\"a\":1}, PrevOffset 1, reason gone", e, e.Object)
	}
	served := obj(journal.Deleted, "wj/b", "u2", "6", `{"b":"as served"}`)
	appendEvents(t, j, "6", served)
	if e := tombstoneOf(t, j); string(e.Object) != `{"b":"as served"}` {
		t.Fatalf("served DELETED object = %s; want the served one", e.Object)
	}
	checkFile(t, j)
}

// Ensure that a file that does not keep objects stores a tombstone as
// before: without an object (its PrevOffset still names the last object's
// record).
func TestJournal_Tombstone_NoObjectsKeptStaysEmpty(t *testing.T) {
	j := open(t, filepath.Join(t.TempDir(), "j.db"))
	appendEvents(t, j, "1", obj(journal.Added, "wj/a", "u1", "1", `{"a":1}`))
	relistDrop(t, j, "wj/a", "u1", "1", "4")
	if e := tombstoneOf(t, j); e.Object != nil || e.PrevOffset != 1 {
		t.Fatalf("tombstone without KeepObjects = %+v (object %s); want no object, PrevOffset 1", e, e.Object)
	}
}

// Ensure that a tombstone of a sealed resource carries the last object
// sealed, as the bucket's copy was: the file holds neither the value nor
// its base64, the DELETED reads whole with the key, and the key's use
// counts it.
func TestJournal_Tombstone_SealedCarriesLastObjectSealed(t *testing.T) {
	path := filepath.Join(t.TempDir(), "s.db")
	k := keyring(t, sealKey(7))
	j := openSealed(t, path, secrets, k)
	t.Cleanup(func() { _ = j.Close() })
	keepObjects(t, j)
	appendEvents(t, j, "1", journal.Event{Type: journal.Added, Key: "wj/a", UID: "u1", ResourceVersion: "1", Origin: journal.OriginWatch,
		Object: secretJSON("a", "tombstone-hunter2")})
	if n, _, err := j.Writer().Trim(2, 100, 0, 0); err != nil || n != 1 {
		t.Fatalf("Trim = %d, %v; want the ADDED", n, err)
	}
	relistDrop(t, j, "wj/a", "u1", "1", "3")
	e := tombstoneOf(t, j)
	var got map[string]any
	if err := json.Unmarshal(e.Object, &got); err != nil || !bytes.Equal(e.Object, secretJSON("a", "tombstone-hunter2")) {
		t.Fatalf("sealed tombstone object = %q, %v; want the Secret opened", e.Object, err)
	}
	use, err := j.Settings().SealKeyUse()
	if err != nil || use[journal.KeyID(sealKey(7))] != 1 {
		t.Fatalf("SealKeyUse = %v, %v; want the tombstone's one sealed object", use, err)
	}
	checkFile(t, j)
	if err := j.Close(); err != nil {
		t.Fatal(err)
	}
	assertNotInFile(t, "tombstone-hunter2", path)
}
