package bolt

import (
	"errors"
	"os"
	"runtime"
	"testing"

	"github.com/watchjournal/watchjournal/internal/storage"
)

// A panic inside a call into bbolt (here: a transaction that has ended,
// standing for bbolt on a corrupt page) is the file's: ErrCorrupt.
func TestPanicInBbolt_IsCorrupt(t *testing.T) {
	s, _ := openTemp(t, Options{NoSync: true})
	defer s.Close()
	var ended storage.Tx
	if err := s.View(func(tx storage.Tx) error { ended = tx; return nil }); err != nil {
		t.Fatal(err)
	}
	err := s.View(func(storage.Tx) error { _ = ended.Meta("rv"); return nil })
	if !errors.Is(err, storage.ErrCorrupt) {
		t.Fatalf("View whose Tx call panicked inside bbolt = %v; want ErrCorrupt", err)
	}
	err = s.Update(func(storage.Tx) error { _ = ended.IndexCount(); return nil })
	if !errors.Is(err, storage.ErrCorrupt) {
		t.Fatalf("Update whose Tx call panicked inside bbolt = %v; want ErrCorrupt", err)
	}
}

// A panic of the caller's function, or of a scan's callback, is not the
// file's: it goes on with its value, and the write transaction is rolled
// back, so the store stays usable and holds nothing of it.
func TestPanicOfCaller_Propagates(t *testing.T) {
	s, _ := openTemp(t, Options{NoSync: true})
	defer s.Close()
	recovered := func(fn func()) (r any) {
		defer func() { r = recover() }()
		fn()
		return nil
	}
	if r := recovered(func() {
		_ = s.Update(func(tx storage.Tx) error {
			if err := tx.SetMeta("rv", []byte("7")); err != nil {
				return err
			}
			panic("caller's")
		})
	}); r != "caller's" {
		t.Fatalf("Update's panic = %v; want the caller's value", r)
	}
	if err := s.Update(func(tx storage.Tx) error { return tx.IndexPut([]byte("k"), []byte("v")) }); err != nil {
		t.Fatalf("Update after a caller's panic: %v", err)
	}
	if r := recovered(func() {
		_ = s.View(func(tx storage.Tx) error {
			return tx.IndexScan(nil, func(k, v []byte) (bool, error) { panic("callback's") })
		})
	}); r != "callback's" {
		t.Fatalf("IndexScan callback's panic = %v; want the callback's value", r)
	}
	var nilMap map[string]int
	if r := recovered(func() {
		_ = s.View(func(storage.Tx) error { nilMap["x"]++; return nil })
	}); r == nil {
		t.Fatal("a runtime error in the caller's function was recovered; want it to go on")
	}
	if err := s.View(func(tx storage.Tx) error {
		if v := tx.Meta("rv"); v != nil {
			t.Errorf("meta rv = %q after the panicked Update; want it rolled back", v)
		}
		if tx.IndexCount() != 1 {
			t.Errorf("index count = %d; want 1", tx.IndexCount())
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
}

// A memory fault while the caller reads a slice the transaction handed
// out (the file shrank under its memory map) is the file's: ErrCorrupt,
// although it happened in the caller's code.
func TestFaultOnTheMap_IsCorrupt(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("relies on SIGBUS past the end of a truncated mapped file")
	}
	s, path := openTemp(t, Options{NoSync: true})
	big := make([]byte, 1<<20)
	for i := range big {
		big[i] = byte(i)
	}
	if err := s.Update(func(tx storage.Tx) error { _, err := tx.Append(big); return err }); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	r, err := open(path, Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	err = r.View(func(tx storage.Tx) error {
		rec := tx.Record(1)
		if len(rec) != len(big) {
			t.Fatalf("record of %d bytes; want %d", len(rec), len(big))
		}
		if err := os.Truncate(path, 0); err != nil {
			t.Fatal(err)
		}
		sum := 0
		for _, b := range rec {
			sum += int(b)
		}
		t.Errorf("read %d bytes past the end of the file (sum %d); want a fault", len(rec), sum)
		return nil
	})
	if !errors.Is(err, storage.ErrCorrupt) {
		t.Fatalf("View that faulted on the memory map = %v; want ErrCorrupt", err)
	}
}
