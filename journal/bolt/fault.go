package bolt

// Panics at the storage boundary (internal/storage, "Panics", says which
// are the file's). bbolt panics on some corrupt pages (an assertion, an
// index out of range while it walks a page), and faults on its memory map
// when the file under it is shorter than the map (a panic under
// runtime/debug.SetPanicOnFault, which View and Update turn on).
//
// The classification is made here, once, by where the panic is raised,
// not by inspecting its stack: every call into bbolt of a transaction
// (begin, each bucket and cursor operation, commit) runs under fileOp,
// which marks a panic raised inside it as a filePanic, and the callbacks
// of the scans (IndexScan, Records, …) run between those calls, never
// inside one. View and Update recover once: a filePanic, or a memory fault
// wherever it happened in the transaction (the slices a Tx hands out are
// the memory map's, and the runtime raises a fault as a panic only while
// SetPanicOnFault is on: see fileFault), is ErrCorrupt; anything else is
// panicked again, from the deferred call, so that its stack still shows
// where it was raised.

import (
	"fmt"
	"runtime"

	bbolt "go.etcd.io/bbolt"

	"github.com/watchjournal/watchjournal/internal/storage"
)

// filePanic is a panic raised inside a call into bbolt.
type filePanic struct{ v any }

func (p filePanic) String() string { return fmt.Sprint(p.v) }

// fileOp, deferred by every function that calls into bbolt, marks a panic
// raised there as the file's (once: a filePanic goes on as it is).
func fileOp() {
	if r := recover(); r != nil {
		if _, ok := r.(filePanic); !ok {
			r = filePanic{r}
		}
		panic(r)
	}
}

// fileFault returns the error for r, a panic recovered from a transaction
// on the file at path, and whether it is the file's: a filePanic, or a
// memory fault (a runtime.Error with an Addr method, which the runtime
// raises, instead of crashing, only under SetPanicOnFault; a nil
// dereference has no Addr).
func fileFault(path string, r any) (error, bool) {
	switch p := r.(type) {
	case filePanic:
		return fmt.Errorf("%w: %s: %v", storage.ErrCorrupt, path, p.v), true
	case runtime.Error:
		if _, ok := p.(interface{ Addr() uintptr }); ok {
			return fmt.Errorf("%w: %s: %v", storage.ErrCorrupt, path, p), true
		}
	}
	return nil, false
}

// begin starts a bbolt transaction.
func begin(db *bbolt.DB, writable bool) (*bbolt.Tx, error) {
	defer fileOp()
	return db.Begin(writable)
}

// commit commits a bbolt write transaction.
func commit(t *bbolt.Tx) error {
	defer fileOp()
	return t.Commit()
}

// rollback rolls a bbolt transaction back, on the way out of View or
// Update; a panic of its own is dropped (the transaction returns an error
// or panics already).
func rollback(t *bbolt.Tx) {
	defer func() { _ = recover() }()
	_ = t.Rollback()
}

// cursor is a bbolt cursor whose every move runs under fileOp; the loops
// that call a callback between moves use it.
type cursor struct{ c *bbolt.Cursor }

// cursor returns a cursor over the named bucket, ok false when the bucket
// does not exist.
func (t *tx) cursor(name []byte) (c cursor, ok bool) {
	defer fileOp()
	b := t.b(name)
	if b == nil {
		return cursor{}, false
	}
	return cursor{b.Cursor()}, true
}

func (c cursor) first() ([]byte, []byte) {
	defer fileOp()
	return c.c.First()
}

func (c cursor) next() ([]byte, []byte) {
	defer fileOp()
	return c.c.Next()
}

func (c cursor) seek(k []byte) ([]byte, []byte) {
	defer fileOp()
	return c.c.Seek(k)
}

func (c cursor) delete() error {
	defer fileOp()
	return c.c.Delete()
}
