package inspect

// Test hooks: settings that only tests change, carried by the Options a
// socket's handler is built from.
//
// Invariant: a handler's request goroutines read these settings from the
// server that Handler built, copied from its Options; none reads a package
// variable. A test sets a hook on the options it builds (the helpers in
// export_test.go), so two handlers of one test, or a handler still serving
// a request while a later test builds its own, each keep their own. The
// zero value is the production behaviour.

import "github.com/watchjournal/watchjournal/journal"

// testHooks are a handler's test settings (Options.hooks).
type testHooks struct {
	// beforeCommit, when set, runs right before the transaction of a
	// commit or of a consumer's change, with the journal it writes: tests
	// delete or create the consumer there.
	beforeCommit func(j *journal.Journal)
}
