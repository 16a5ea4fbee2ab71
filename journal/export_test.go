package journal

import "github.com/watchjournal/watchjournal/internal/storage"

// Store returns the underlying store, for the tests that write the file
// below the journal's API (a record that does not decode, a stray object).
func (w *Writer) Store() storage.Store { return w.j.store }
