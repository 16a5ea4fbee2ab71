// Package journalhook is the one door from package internal/journalwrite
// into a journal's write side, which package journal keeps unexported
// (no writer machinery in journal's API). It sits below journal,
// so that journal can set it without importing journalwrite, which imports
// journal: the standard access hook, as in the standard library's
// internal packages.
package journalhook

// Writer returns the write side of j, a *journal.Journal, as a value that
// implements journalwrite.Writer. Package journal sets it in its init, so
// it is set whenever journal is linked in; journalwrite.Of asserts the
// result's type.
var Writer func(j any) any
