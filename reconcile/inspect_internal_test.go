package reconcile

import (
	"errors"
	"testing"

	"github.com/watchjournal/watchjournal/journal/inspect"
)

// The socket waits no longer for a loop whose Phase is inspect.PhaseStopped:
// it must be the Phase a stopped loop reports.
func TestInspectPhaseStopped(t *testing.T) {
	if got := (Status{Phase: PhaseStopped}).inspect().Phase; got != inspect.PhaseStopped {
		t.Fatalf("a stopped loop's socket Phase = %q; want inspect.PhaseStopped %q", got, inspect.PhaseStopped)
	}
}

// Every field the socket reports comes from the Status field of its name.
func TestInspectStatusFields(t *testing.T) {
	boom := errors.New("boom")
	s := Status{Phase: PhaseWatching, ResourceVersion: "12", Synced: true, LastError: boom,
		Lists: 1, Watches: 2, Gone: 3, ListRestarts: 4, IdleRestarts: 5, Events: 6, Verifies: 7, Divergences: 8,
		ListMode: ListModePaginated, ListModeReason: "why", Encoding: "protobuf", ShardMode: ShardClient}
	s.ListPages, s.ListObjects = 9, 10
	want := inspect.LoopStatus{Phase: "Watching", ResourceVersion: "12", Synced: true, LastError: boom,
		Lists: 1, Watches: 2, Gone: 3, ListRestarts: 4, IdleRestarts: 5, Events: 6, Verifies: 7, Divergences: 8,
		ListPages: 9, ListObjects: 10, ListMode: "paginated", ListModeReason: "why", Encoding: "protobuf", ShardMode: "client"}
	if got := s.inspect(); got != want {
		t.Fatalf("Status.inspect() = %+v; want %+v", got, want)
	}
}
