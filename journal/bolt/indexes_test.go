package bolt

import (
	"fmt"
	"testing"

	"github.com/watchjournal/watchjournal/internal/storage"
)

// Derived buckets: created on the first put, scanned by prefix, dropped
// whole; only "idx/" names; a read transaction cannot write them.
func TestDerivedBuckets(t *testing.T) {
	s, _ := openTemp(t, Options{NoSync: true})
	defer s.Close()
	const b = "idx/color"
	err := s.Update(func(tx storage.Tx) error {
		if v := tx.DerivedGet(b, []byte("x")); v != nil {
			return fmt.Errorf("DerivedGet before the bucket exists = %q", v)
		}
		if err := tx.DerivedDelete(b, []byte("x")); err != nil {
			return fmt.Errorf("DerivedDelete without the bucket = %v; want nil", err)
		}
		for _, k := range []string{"va", "vb", "wa", "v"} {
			if err := tx.DerivedPut(b, []byte(k), []byte(k+"!")); err != nil {
				return err
			}
		}
		for _, name := range []string{"index", "meta", "idx/"} {
			if err := tx.DerivedPut(name, []byte("k"), nil); err == nil {
				return fmt.Errorf("DerivedPut(%q) = nil; want an error", name)
			}
		}
		return tx.DerivedDelete(b, []byte("vb"))
	})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	err = s.View(func(tx storage.Tx) error {
		if err := tx.DerivedPut(b, []byte("vz"), nil); err == nil {
			return fmt.Errorf("DerivedPut in a read transaction = nil; want an error")
		}
		return tx.DerivedScan(b, []byte("v"), func(k, v []byte) (bool, error) {
			got = append(got, string(k)+"="+string(v))
			return true, nil
		})
	})
	if err != nil || fmt.Sprint(got) != "[v=v! va=va!]" {
		t.Fatalf("DerivedScan(v) = %q, %v; want [v=v! va=va!]", got, err)
	}
	err = s.Update(func(tx storage.Tx) error {
		if err := tx.DropDerived(b); err != nil {
			return err
		}
		if err := tx.DropDerived(b); err != nil {
			return fmt.Errorf("DropDerived of an absent bucket = %v; want nil", err)
		}
		if v := tx.DerivedGet(b, []byte("va")); v != nil {
			return fmt.Errorf("DerivedGet after DropDerived = %q", v)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
