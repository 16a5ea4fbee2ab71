package journal

// The file's meta entries that belong to the packages above journal: the
// loop's record of a list mode (reconcile/listmode.go). Each namespace is a
// prefix of the entry's name, "ns.", that journal's own entries never
// carry (they hold no dot), so no one's entry overwrites another's. Each
// Get and Put is its own transaction: these are settings a process reads at
// start and writes when they change, never part of an event's commit.

import (
	"fmt"
	"strings"

	"github.com/watchjournal/watchjournal/internal/storage"
)

// Meta is one namespace of the file's meta entries, for a package that
// keeps a small setting in the file beside the journal (Writer.Meta). Each
// Get and Put is a transaction of its own; it is safe for concurrent use.
type Meta struct {
	j      *Journal
	prefix string
}

// Meta returns the meta entries of namespace ns, which must be non-empty
// and hold no dot (else it panics: ns is a constant of the calling
// package). The entry key of namespace ns is stored as "ns.key":
// reconcile's list mode, ns "reconcile" and key "listMode", is the entry
// "reconcile.listMode" that files written before Meta existed hold.
func (w *Writer) Meta(ns string) *Meta {
	if ns == "" || strings.Contains(ns, ".") {
		panic(fmt.Sprintf("journal: Meta namespace %q is empty or holds a dot", ns))
	}
	return &Meta{j: w.j, prefix: ns + "."}
}

// Get returns the value of the entry key, or nil when it is not set. A
// read that fails is an error, never "not set": the store's (ErrCorrupt,
// or ErrClosed for a closed journal).
func (m *Meta) Get(key string) ([]byte, error) {
	var v []byte
	err := m.j.store.View(func(tx storage.Tx) error {
		v = append([]byte(nil), tx.Meta(m.prefix+key)...)
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("journal: meta %s%s: %w", m.prefix, key, err)
	}
	if len(v) == 0 {
		return nil, nil
	}
	return v, nil
}

// Put sets the entry key to v, in a transaction of its own; a nil v
// deletes it. It returns ErrReadOnly on a journal opened read-only.
func (m *Meta) Put(key string, v []byte) error {
	if err := m.j.store.Update(func(tx storage.Tx) error { return tx.SetMeta(m.prefix+key, v) }); err != nil {
		return fmt.Errorf("journal: meta %s%s: %w", m.prefix, key, err)
	}
	return nil
}
