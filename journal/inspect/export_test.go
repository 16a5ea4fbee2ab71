package inspect

// SetBeforeCommit makes fn run right before a commit's transaction, until
// the returned restore is called.
func SetBeforeCommit(fn func()) (restore func()) {
	old := beforeCommit
	beforeCommit = fn
	return func() { beforeCommit = old }
}
