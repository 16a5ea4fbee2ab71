package journal

// Read-your-deletes. WaitForResourceVersion cannot tell a delete: the
// client's Delete returns no resourceVersion of the deletion (a Status, or
// nothing), and the object read before it has the resourceVersion its
// key's index entry already holds, so that wait ends at once while a read
// may still see the object. WaitForDeleted waits for the key itself: gone
// from the index, or taken by another UID (the name deleted and created
// again).

import (
	"context"
	"errors"
)

// WaitForDeleted blocks until the journal has applied the delete of the
// object uid named key (<namespace>/<name>, or <name>): the index has no
// entry for key, or its entry is another UID's. It returns nil then; a
// *NotAppliedError (ErrNotApplied, and ctx's error; ResourceVersion empty,
// KeyResourceVersion the entry's) when ctx ends first; ErrClosed when the
// journal is closed. uid "" waits for the key to be absent. Give ctx a
// deadline: a delete the watch never delivers (the loop stopped, an
// object outside the journal's selectors) is never applied. Appends in
// this process wake the wait; otherwise the index is re-read every
// rvPollInterval.
func (j *Journal) WaitForDeleted(ctx context.Context, key, uid string) error {
	if key == "" {
		return errors.New("journal: WaitForDeleted: empty key")
	}
	return j.waitApplied(ctx, func() (bool, NotAppliedError, error) {
		e, ok, err := j.Lookup(key)
		if err != nil {
			return false, NotAppliedError{}, err
		}
		applied, _ := j.ResourceVersion()
		return !ok || (uid != "" && e.UID != uid), NotAppliedError{Key: key, Applied: applied, KeyResourceVersion: e.ResourceVersion}, nil
	})
}
