package reconcile

// A server that replays from scratch on resume. Some
// aggregated apiservers accept any resourceVersion on a watch and stream
// every object as ADDED from the start, as kube-apiserver does for a watch
// without one. Taken as a resume, that stream would move the journal
// backwards: the last synthetic ADDED's resourceVersion (any object's, the
// oldest maybe) would become the journal's position, and a verify at
// exactly it would journal DELETED for live objects created since. And it
// hides every deletion made while the watch was away.
//
// Three rules, in plan (watch.go) and Fold (diff.go):
//
//   - The journal's resourceVersion never goes backwards: each frame moves
//     it to the later of the two (later), by CompareResourceVersion; where
//     they do not compare, to the frame's, as the server's own order is
//     then all there is.
//   - An event at or below what the index holds for its key is a replay:
//     Fold journals nothing for a resourceVersion that compares below the
//     indexed one (an older state of the key, or of an object since
//     replaced), nothing for the same one, and one MODIFIED for one that
//     differs and does not compare.
//   - A watch from a resourceVersion receives only what happened after it:
//     an event whose resourceVersion is at or below the journal's
//     position (equal where they do not compare), or an ADDED for an
//     object the index holds with the same UID, shows the server replaying
//     from scratch. The loop journals nothing of that frame or after it,
//     logs it, counts it in Status.Replays, and relists as after a 410
//     (origin restart before the first frame after a restart, relist
//     after): the list's diff finds what the replay cannot show, the
//     deletions.
//
// The watch that follows a list starts at the list's resourceVersion;
// on such a server it replays the objects the list just gave, which fold
// to nothing, and those changed since, which fold to MODIFIED. It is not
// taken for a replay (stateWatch.fromList): otherwise every list would be
// followed by another, forever. What that leaves: an object deleted
// between the list and the start of that watch stays in the index until
// the next resume's relist or the next verify (VerifyInterval). Every
// later resume on such a server is a relist: a list per watch
// (WatchTimeout), the price of a server that does not serve a resume.

import (
	"k8s.io/apimachinery/pkg/util/resourceversion"

	"github.com/watchjournal/watchjournal/journal"
)

// watchOp is one frame of a batch as plan folds it.
type watchOp struct {
	// item indexes the batch's items (this shard's keys); -1 for a
	// bookmark or another shard's key, which move the resume point only.
	item int
	// rv is the frame's resourceVersion.
	rv string
	// event is set for ADDED, MODIFIED and DELETED (not bookmarks).
	event bool
}

// later returns the later of the resourceVersions cur and next; next
// where they do not compare (or cur is empty).
func later(cur, next string) string {
	if cur == "" || next == "" {
		return max(cur, next) // the non-empty one
	}
	if below(next, cur) {
		return cur
	}
	return next
}

// atOrBelow reports whether resourceVersion rv is at or below pos: by
// CompareResourceVersion, or equal where they do not compare.
func atOrBelow(rv, pos string) bool {
	if rv == "" || pos == "" {
		return false
	}
	if cmp, err := resourceversion.CompareResourceVersion(rv, pos); err == nil {
		return cmp <= 0
	}
	return rv == pos
}

// replayed reports whether a watch event (typ, it), given what the index
// holds for its key (cur, present), shows a server replaying from scratch
// a watch whose journal position is pos (see the top of this file).
func replayed(pos string, cur journal.IndexEntry, present bool, typ journal.EventType, it Item) bool {
	if atOrBelow(it.ResourceVersion, pos) {
		return true
	}
	return typ == journal.Added && present && cur.UID == it.UID
}

// replay records a replay from scratch noticed at a frame of resourceVersion
// rv on the watch s, and returns the relist it leads to.
func (l *Loop) replay(s stateWatch, rv string) state {
	l.log.Info("the apiserver replayed the watch from scratch (it ignores the resourceVersion of a resume): relisting",
		"resourceVersion", s.rv, "frameResourceVersion", rv, "origin", string(s.goneOrigin))
	l.update(func(x *Status) { x.Replays++ })
	return stateList{origin: s.goneOrigin}
}
