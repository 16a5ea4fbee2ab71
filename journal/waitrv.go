package journal

// Read-your-writes. After a write to the apiserver returns resourceVersion
// R (the object's metadata.resourceVersion in the answer), a read through
// the journal may not see it yet: the write reaches the journal by the
// watch, like an informer's cache, milliseconds to seconds later.
// WaitForResourceVersion bounds that wait.
//
// Applied means either of:
//   - the journal's resourceVersion (the last event's, bookmark's or
//     list's) compares at or past R: everything up to R is applied;
//   - the index entry of the written object's key has a resourceVersion at
//     or past R: that object's own event (or a later one) is applied.
//
// The journal's resourceVersion moves with every event of the resource,
// the written object's own included, and with bookmarks; the key's entry
// also tells the object's own event apart from the rest. A write that
// journals no event (an object outside the journal's namespace or
// selectors, a patch that changed nothing and kept its resourceVersion) is
// applied once another event or a bookmark passes R: the apiserver sends
// bookmarks about once a minute, so such a wait can take that long. RVs
// compare with apimachinery's CompareResourceVersion; one that does not
// parse (not an integer, another server's format) counts as applied only
// when equal. After a Delete the key is gone from the index: the wait ends
// on the journal's resourceVersion (the DELETED event's).
//
// Appends in this process wake the wait; a bookmark (which appends
// nothing) is seen by a re-read every rvPollInterval.

import (
	"context"
	"errors"
	"fmt"
	"time"

	"k8s.io/apimachinery/pkg/util/resourceversion"
)

// ErrNotApplied matches a *NotAppliedError: WaitForResourceVersion's
// context ended before the journal applied the resourceVersion.
var ErrNotApplied = errors.New("journal: resourceVersion not applied")

// NotAppliedError is WaitForResourceVersion's error when its context ends
// first. It matches ErrNotApplied and the context's error
// (context.DeadlineExceeded, context.Canceled).
type NotAppliedError struct {
	// Key and ResourceVersion are what was waited for.
	Key, ResourceVersion string
	// Applied is the journal's resourceVersion when the wait ended;
	// KeyResourceVersion the key's in the index ("" when absent).
	Applied, KeyResourceVersion string
	// Err is the context's error.
	Err error
}

func (e *NotAppliedError) Error() string {
	return fmt.Sprintf("journal: resourceVersion %s of %q not applied (journal at %q, key at %q): %v",
		e.ResourceVersion, e.Key, e.Applied, e.KeyResourceVersion, e.Err)
}

// Unwrap returns ErrNotApplied and the context's error.
func (e *NotAppliedError) Unwrap() []error { return []error{ErrNotApplied, e.Err} }

// rvPollInterval is how often WaitForResourceVersion re-reads the
// journal's resourceVersion when no append wakes it (a bookmark).
const rvPollInterval = 200 * time.Millisecond

// WaitForResourceVersion blocks until the journal has applied
// resourceVersion rv (the top of waitrv.go says what applied means: the
// journal's resourceVersion at or past rv, or key's index entry at or past
// rv), and returns nil; or until ctx is done: then a *NotAppliedError
// (ErrNotApplied; errors.Is with ctx's error too); or until the journal
// is closed (ErrClosed). key is the written object's key
// (<namespace>/<name>, or <name>); "" waits on the journal's
// resourceVersion alone. Give ctx a deadline: a resourceVersion of
// another resource, or one the watch never delivers (the loop stopped),
// is never applied.
func (j *Journal) WaitForResourceVersion(ctx context.Context, key, rv string) error {
	if rv == "" {
		return errors.New("journal: WaitForResourceVersion: empty resourceVersion")
	}
	return j.waitApplied(ctx, func() (bool, NotAppliedError, error) {
		applied, keyRV, done, err := j.appliedRV(key, rv)
		return done, NotAppliedError{Key: key, ResourceVersion: rv, Applied: applied, KeyResourceVersion: keyRV}, err
	})
}

// waitApplied is the wait of WaitForResourceVersion and WaitForDeleted:
// check reads whether what they wait for is applied (and what the
// *NotAppliedError would say if ctx ended now) after each append of this
// process, or every rvPollInterval without one.
func (j *Journal) waitApplied(ctx context.Context, check func() (bool, NotAppliedError, error)) error {
	for {
		head, err := j.Head()
		if err != nil {
			return err
		}
		done, na, err := check()
		if err != nil {
			return err
		}
		if done {
			return nil
		}
		wctx, cancel := context.WithTimeout(ctx, rvPollInterval)
		err = j.Wait(wctx, head)
		cancel()
		switch {
		case ctx.Err() != nil:
			na.Err = ctx.Err()
			return &na
		case errors.Is(err, ErrClosed):
			return err
		}
	}
}

// appliedRV reads the journal's and key's resourceVersions and whether
// either is at or past rv.
func (j *Journal) appliedRV(key, rv string) (applied, keyRV string, done bool, err error) {
	if applied, err = j.ResourceVersion(); err != nil {
		return "", "", false, err
	}
	if atOrPast(applied, rv) {
		return applied, "", true, nil
	}
	if key == "" {
		return applied, "", false, nil
	}
	e, ok, err := j.Lookup(key)
	if err != nil || !ok {
		return applied, "", false, err
	}
	return applied, e.ResourceVersion, atOrPast(e.ResourceVersion, rv), nil
}

// atOrPast reports whether have compares at or past want; equal strings
// when either does not parse.
func atOrPast(have, want string) bool {
	if have == "" {
		return false
	}
	n, err := resourceversion.CompareResourceVersion(have, want)
	if err != nil {
		return have == want
	}
	return n >= 0
}
