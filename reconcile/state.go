package reconcile

// The loop's states: the list/watch protocol of the API concepts page
// ("Efficient detection of changes") as an explicit state machine. Each
// state holds only what it needs; no flags stand in for a state. Each has
// one function that makes its request and returns the next state (doc.go,
// "Where to find it", names them), and step moves between them; the
// backoff is a state of its own, as kube-rs's watcher steps.
//
// The transition table:
//
//	start     → watch(stored RV, check)     when the file holds a resourceVersion
//	start     → list                        otherwise
//	watch     → list (restart)              check: the server's RV compares below the stored one (rewound)
//	watch     → list (restart)              check: a list at exactly the stored RV answers 410
//	watch     → watch(last RV, check)       the watch request got no answer (an outage)
//	list      → watch(list RV, same conn.)  a streaming list reached its initial-events-end bookmark
//	list      → list (paginated)            the server refused a streaming list: remembered in the file (listmode.go)
//	list      → list (lookups)              a page or batch broke key order
//	list      → list (full pages)           the server serves no metadata-only lists
//	list      → list                        a streaming list answered 410: again, at most 3 times in a row
//	list      → backoff → list              a streaming list broke or failed before its bookmark: nothing committed
//	list      → watch(list RV)              after a complete paginated list
//	list      → list                        a continue token expired (410): from page one
//	watch     → watch(last RV)              the server ended the watch normally, or its connection ended (EOF, probable EOF, timeout)
//	watch     → list                        410 Gone, in either shape
//	watch     → list                        500 "PrevKv=nil": the RV is just below etcd's compaction revision
//	watch     → list                        a frame shows the server replaying from scratch (replay.go)
//	watch     → verify                      Verify, the VerifyInterval deadline (anti-entropy), or a restart's resume proven (once)
//	verify    → list(verify at applied RV)  the applied RV is still served (a one-item list at exactly it)
//	verify    → list(verify at current RV)  it answered 410
//	watch     → watch(last RV)              nothing for IdleTimeout: a stalled connection
//	watch     → backoff → watch(last RV)    429, 5xx, network error, undecodable frame: never a relist
//	any       → backoff → same state        any other error (jittered, capped, floored by Retry-After)

import (
	"github.com/watchjournal/watchjournal/journal"
)

// state is one phase of the list/watch protocol.
type state interface{ phase() Phase }

// stateStart decides between resuming and listing.
type stateStart struct{}

// stateList runs a list, streaming (stream.go) or paginated (pages.go), and
// diffs it against the index.
type stateList struct {
	// origin tags the inferred events: relist, or restart when the gap
	// includes the time the process was down.
	origin journal.Origin
	// unordered is set when a page broke key order: deletions are then
	// found by lookup of the listed keys.
	unordered bool
	// verify is set for an anti-entropy relist of a healthy watch: any
	// event it finds is a divergence (an event the watch lost).
	verify bool
	// applied, for a verify, is the resourceVersion the journal had
	// applied when the verify began; exact is set when the list reads at
	// exactly it (resourceVersionMatch=Exact), so that index and list
	// describe the same moment (verify.go).
	applied string
	exact   bool
	// paged is set for the list that follows a refused streaming list:
	// it runs in pages whatever the list mode says (listmode.go).
	paged bool
	// restarts counts the times in a row this list started again after
	// its snapshot went (list.go, maxListRestarts).
	restarts int
}

// exactRV is the resourceVersion a verify's first page reads at exactly;
// empty for a consistent read.
func (s stateList) exactRV() string {
	if s.exact {
		return s.applied
	}
	return ""
}

// again is the list that runs after the backoff that follows s: begun
// anew, with no restart counted and the list mode chosen again; a verify
// checks the applied resourceVersion again first.
func (s stateList) again() state {
	if s.verify {
		return stateVerify{applied: s.applied, unordered: s.unordered}
	}
	s.restarts, s.paged = 0, false
	return s
}

// stateVerify checks whether the resourceVersion the journal applied is
// still served, before the verify's list (verify.go).
type stateVerify struct {
	applied string
	// unordered carries over from a verify whose list broke key order.
	unordered bool
}

// stateWatch watches from a resourceVersion the journal has fully applied.
type stateWatch struct {
	rv string
	// goneOrigin is the origin a 410 leads to: restart until the first
	// frame after a process restart, relist after.
	goneOrigin journal.Origin
	// check asks for the resume check before the watch opens (probe.go):
	// at start, and after a watch could not be opened.
	check bool
	// current is the server's list resourceVersion the resume check read
	// ("" when it did not run): a resume from current itself is proven
	// current at once (synced.go).
	current string
	// fromList is set for the watch that starts at the resourceVersion of
	// the list just committed: a replay from scratch on it repeats that
	// list and is folded, not relisted again (replay.go).
	fromList bool
	// open is the connection of the streaming list that led here, past its
	// initial events (stream.go): the watch goes on on it, without a new
	// request. nil: the watch opens its own.
	open *stream
}

// resume is the watch that follows s from its resourceVersion on a new
// request, with s's goneOrigin and current.
func (s stateWatch) resume() stateWatch {
	return stateWatch{rv: s.rv, goneOrigin: s.goneOrigin, current: s.current}
}

// stateBackoff waits, then goes on to next.
type stateBackoff struct {
	next state
	err  error
}

func (stateStart) phase() Phase   { return PhaseStarting }
func (stateList) phase() Phase    { return PhaseListing }
func (stateVerify) phase() Phase  { return PhaseListing }
func (stateWatch) phase() Phase   { return PhaseConnecting }
func (stateBackoff) phase() Phase { return PhaseBackoff }

// Phase names a state of the loop, as shown by Status.
type Phase string

// Phases.
const (
	PhaseStarting Phase = "Starting"
	PhaseListing  Phase = "Listing"
	// PhaseConnecting: a watch request is on its way; PhaseWatching: it
	// is open and events flow.
	PhaseConnecting Phase = "Connecting"
	PhaseWatching   Phase = "Watching"
	PhaseBackoff    Phase = "Backoff"
	PhaseStopped    Phase = "Stopped"
)
