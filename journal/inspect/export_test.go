package inspect

import "github.com/watchjournal/watchjournal/journal"

// SetBeforeCommit makes fn run right before a commit's transaction, until
// the returned restore is called.
func SetBeforeCommit(fn func()) (restore func()) {
	old := beforeCommit
	beforeCommit = func(*journal.Journal) { fn() }
	return func() { beforeCommit = old }
}
