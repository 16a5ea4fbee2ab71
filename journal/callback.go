package journal

// Callers' callbacks inside read transactions.
//
// Snapshot, ViewObjects and ObjectView.Scan call the caller's function
// inside a read transaction. The store recovers a panic in a transaction
// as ErrCorrupt, since bbolt panics (or faults on the memory map) on some
// corrupt pages; but a panic in the caller's own code (a nil map, an index
// out of range) says nothing about the file, and reporting it as "not a
// readable database file" sends the operator after a healthy file. So each
// callback runs under callback, which recovers its panic and ends the
// transaction with an error carrying the value; once the transaction is
// over, the exported method panics again with it (repanic), as
// Writer.Update does for write transactions (tx.go). A panic that the
// store raised while the callback ran (a Tx method's guard marks it a
// storePanic: ObjectView.Get and Scan reach corrupt pages too) is left to
// the store, which returns it as ErrCorrupt.

import "errors"

// callbackPanic carries a panic of the caller's callback out of a read
// transaction.
type callbackPanic struct{ value any }

func (*callbackPanic) Error() string { return "journal: callback panicked" }

// callback runs fn, the caller's code, and returns its panic as a
// *callbackPanic; the store's own panics go on.
func callback(fn func() error) (err error) {
	defer func() {
		r := recover()
		if _, ok := r.(storePanic); ok {
			panic(r)
		}
		if r != nil {
			err = &callbackPanic{value: r}
		}
	}()
	return fn()
}

// repanic panics with the caller's value when err carries a
// *callbackPanic.
func repanic(err error) {
	var p *callbackPanic
	if errors.As(err, &p) {
		panic(p.value)
	}
}
