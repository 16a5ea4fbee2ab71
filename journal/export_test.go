package journal

import "github.com/watchjournal/watchjournal/internal/storage"

// Store returns the underlying store, for the tests that write the file
// below the journal's API (a record that does not decode, a stray object).
func (w *writer) Store() storage.Store { return w.j.store }

// StoreOf returns j's store (writer.Store), for the tests of package
// journal_test, which reach the writer as a journalwrite.Writer.
func StoreOf(j *Journal) storage.Store { return j.writer().Store() }
