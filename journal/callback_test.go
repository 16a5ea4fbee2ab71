package journal_test

import (
	"errors"
	"path/filepath"
	"strings"
	"testing"

	"github.com/watchjournal/watchjournal/journal"
)

// panicOf runs fn and returns what it panicked with (nil when it did not)
// and the error it returned otherwise.
func panicOf(fn func() error) (value any, err error) {
	defer func() { value = recover() }()
	return nil, fn()
}

// A panic in the caller's read callback (Snapshot, ViewObjects,
// ObjectView.Scan) is the caller's: it propagates with the caller's value,
// it is not reported as a corrupt file, and the read transaction is
// released (Close does not wait for it; the journal reads and writes on).
func TestJournal_CallbackPanic_PropagatesNotCorrupt(t *testing.T) {
	cases := []struct {
		name string
		read func(j *journal.Journal) error
	}{
		{"Snapshot, a nil-map write", func(j *journal.Journal) error {
			var seen map[string]bool // nil: the caller forgot make
			_, err := j.Snapshot(func(e journal.IndexEntry) error { seen[e.Key] = true; return nil })
			return err
		}},
		{"ViewObjects", func(j *journal.Journal) error {
			return j.ViewObjects(func(v *journal.ObjectView) error {
				var heads map[uint64]bool
				heads[v.Head()] = true
				return nil
			})
		}},
		{"ObjectView.Scan", func(j *journal.Journal) error {
			return j.ViewObjects(func(v *journal.ObjectView) error {
				return v.Scan("", func(k string, _ []byte) (bool, error) {
					var seen map[string]bool
					seen[k] = true
					return true, nil
				})
			})
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "j.db")
			j := open(t, path)
			keepObjects(t, j)
			a := obj(journal.Added, "wj/a", "u1", "1", `{"a":1}`)
			appendEvents(t, j, "1", a)
			v, err := panicOf(func() error { return c.read(j) })
			if v == nil {
				t.Fatalf("the callback's panic did not propagate: returned %v; want the nil-map panic", err)
			}
			if rerr, ok := v.(error); !ok || !strings.Contains(rerr.Error(), "nil map") {
				t.Fatalf("panicked with %v; want the callback's nil-map panic", v)
			}
			if _, err := j.Snapshot(func(journal.IndexEntry) error { return nil }); err != nil {
				t.Fatalf("Snapshot after the callback's panic: %v; want the journal readable", err)
			}
			b := obj(journal.Added, "wj/b", "u2", "2", `{"b":1}`)
			appendEvents(t, j, "2", b)
			if err := j.Close(); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// The callback's own errors are still returned as they are.
func TestJournal_CallbackError_Returned(t *testing.T) {
	j := open(t, filepath.Join(t.TempDir(), "j.db"))
	appendEvents(t, j, "1", ev(journal.Added, "wj/a", "u1", "1"))
	stop := errors.New("stop")
	if _, err := j.Snapshot(func(journal.IndexEntry) error { return stop }); !errors.Is(err, stop) {
		t.Fatalf("Snapshot = %v; want the callback's error", err)
	}
}
