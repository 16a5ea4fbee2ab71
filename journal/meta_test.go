package journal_test

import (
	"bytes"
	"path/filepath"
	"testing"

	"github.com/watchjournal/watchjournal/internal/storage"
	"github.com/watchjournal/watchjournal/journal"
)

// Ensure that a namespace's entry is the meta entry "ns.key" of the file,
// so that the loop's list mode ("reconcile", "listMode") is the entry
// "reconcile.listMode" that files written before Meta hold, and that a nil
// value deletes it.
func TestWriter_Meta_NamespacedEntry(t *testing.T) {
	j := open(t, filepath.Join(t.TempDir(), "j.db"))
	m := j.Writer().Meta("reconcile")
	if v, err := m.Get("listMode"); v != nil || err != nil {
		t.Fatalf("Get of an entry never set = %q, %v; want nil, nil", v, err)
	}
	if err := m.Put("listMode", []byte(`{"mode":"paginated"}`)); err != nil {
		t.Fatal(err)
	}
	var raw []byte
	_ = journal.StoreOf(j).View(func(tx storage.Tx) error { raw = append(raw, tx.Meta("reconcile.listMode")...); return nil })
	if !bytes.Equal(raw, []byte(`{"mode":"paginated"}`)) {
		t.Fatalf("meta entry reconcile.listMode = %q; want the value Put", raw)
	}
	if v, err := m.Get("listMode"); string(v) != `{"mode":"paginated"}` || err != nil {
		t.Fatalf("Get = %q, %v; want the value Put", v, err)
	}
	if err := m.Put("listMode", nil); err != nil {
		t.Fatal(err)
	}
	if v, err := m.Get("listMode"); v != nil || err != nil {
		t.Fatalf("Get after Put(nil) = %q, %v; want nil, nil", v, err)
	}
}
