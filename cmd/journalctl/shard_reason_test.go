//go:build linux

package main

import (
	"testing"

	"github.com/watchjournal/watchjournal/journal"
)

// movedReason reports whether e says its key moved between shards.
func movedReason(e journal.Event) bool { return e.Reason == journal.ReasonMoved && !e.IsDeletion() }

// checkMovedIn checks that the survivors of a kill -9 journaled the dead
// member's keys as moved in.
func checkMovedIn(t *testing.T, n int) {
	t.Helper()
	t.Logf("the survivors journaled %d ADDED, reason moved", n)
	if n == 0 {
		t.Errorf("no ADDED with reason moved after the kill; want the dead member's keys")
	}
}

// checkMovedOut checks that the members journaled the keys they handed
// back as moved out.
func checkMovedOut(t *testing.T, n int) {
	t.Helper()
	t.Logf("the others journaled %d DELETED, reason moved", n)
	if n == 0 {
		t.Errorf("no DELETED with reason moved after the restart; want the restarted member's keys")
	}
}

// checkJoin checks that a member joining with an empty file journaled
// every key it holds as moved in, and the others as many as moved out.
func checkJoin(t *testing.T, held, in, out int) {
	t.Helper()
	t.Logf("r3 holds %d keys: %d ADDED moved in; the others %d DELETED moved out", held, in, out)
	if held == 0 || in != held || out != held {
		t.Errorf("r3 holds %d keys, journaled %d ADDED moved; the others %d DELETED moved; want all three equal", held, in, out)
	}
}
