package inspect

import "github.com/watchjournal/watchjournal/journal"

// WithBeforeCommit returns o whose handler runs fn, with the journal it
// writes, right before the transaction of every commit or consumer change
// (testhooks.go).
func WithBeforeCommit(o Options, fn func(j *journal.Journal)) Options {
	o.hooks.beforeCommit = fn
	return o
}
