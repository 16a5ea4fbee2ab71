package journal

import "github.com/watchjournal/watchjournal/internal/storage"

// StoreOf returns j's underlying store, for the tests of package
// journal_test that write the file below the journal's API (a record that
// does not decode, a stray object).
func StoreOf(j *Journal) storage.Store { return j.store }
