package reconcile

import (
	"k8s.io/apimachinery/pkg/util/resourceversion"

	"github.com/watchjournal/watchjournal/journal"
)

// Item is one object as listed or watched.
type Item struct {
	// Key is the index key: <namespace>/<name>, or <name> when
	// cluster-scoped.
	Key string
	// UID is metadata.uid.
	UID string
	// ResourceVersion is metadata.resourceVersion, opaque.
	ResourceVersion string
	// Object is the object as served: JSON (metadata only for a
	// metadata-only journal), or a built-in kind's protobuf envelope from
	// a protobuf watch or streaming list (wire.go).
	Object []byte
}

// Diff compares the index entries of a key range with the objects listed in
// the same range and returns the events that turn the first into the
// second, in key order. Both inputs must be sorted by key, strictly
// increasing. It is pure: no I/O, no clock (Time and Origin are left zero).
//
//   - a listed key absent from the index: ADDED;
//   - an indexed key absent from the list: DELETED, a tombstone with the
//     indexed UID and resourceVersion, and no Reason: the object may be
//     gone or out of the selector, which only the server can tell (the
//     loop asks it, reason.go);
//   - the same key with another UID: DELETED (old, journal.ReasonGone: its
//     UID can no longer exist) then ADDED (new), never MODIFIED: the name
//     was deleted and created again;
//   - the same key and UID with another resourceVersion: MODIFIED;
//   - equal resourceVersion strings: nothing. resourceVersions are compared
//     for equality only, never ordered (API concepts, "Resource versions").
func Diff(indexed []journal.IndexEntry, listed []Item) []journal.Event {
	var out []journal.Event
	i, l := 0, 0
	for i < len(indexed) || l < len(listed) {
		switch {
		case l == len(listed) || (i < len(indexed) && indexed[i].Key < listed[l].Key):
			out = append(out, tombstone(indexed[i]))
			i++
		case i == len(indexed) || listed[l].Key < indexed[i].Key:
			out = append(out, event(journal.Added, listed[l]))
			l++
		default:
			out = appendChange(out, indexed[i], listed[l])
			i++
			l++
		}
	}
	return out
}

// appendChange appends what turns the indexed entry into the listed item of
// the same key.
func appendChange(out []journal.Event, cur journal.IndexEntry, it Item) []journal.Event {
	switch {
	case cur.UID != it.UID:
		return append(out, gone(cur), event(journal.Added, it))
	case cur.ResourceVersion != it.ResourceVersion:
		e := event(journal.Modified, it)
		e.PrevResourceVersion = cur.ResourceVersion
		return append(out, e)
	}
	return out
}

// Fold turns one watch event into journal events, given what the index holds
// for its key (cur, present or not). It keeps each key's journal sequence
// consistent even if the server repeats or skips an event:
//
//   - any event whose resourceVersion compares below the indexed one:
//     nothing (a replay of an older state of the key, or of an object
//     since replaced: replay.go);
//   - ADDED or MODIFIED of a key not indexed: ADDED;
//   - ADDED or MODIFIED with another UID: DELETED (old) then ADDED;
//   - ADDED or MODIFIED with the indexed resourceVersion: nothing (a
//     duplicate, e.g. after a resume);
//   - otherwise ADDED or MODIFIED: MODIFIED;
//   - DELETED of a key not indexed: nothing;
//   - DELETED with another UID: DELETED of the indexed (old) UID as a
//     tombstone, journal.ReasonGone; the new one came and went unseen;
//   - DELETED: DELETED with the object as served, and no Reason: a
//     deletion and a selector exit look the same (reason.go).
func Fold(cur journal.IndexEntry, present bool, typ journal.EventType, it Item) []journal.Event {
	if present && below(it.ResourceVersion, cur.ResourceVersion) {
		return nil
	}
	switch typ {
	case journal.Added, journal.Modified:
		if !present {
			return []journal.Event{event(journal.Added, it)}
		}
		return appendChange(nil, cur, it)
	case journal.Deleted:
		switch {
		case !present:
			return nil
		case cur.UID != it.UID:
			return []journal.Event{gone(cur)}
		}
		return []journal.Event{event(journal.Deleted, it)}
	}
	return nil
}

func event(t journal.EventType, it Item) journal.Event {
	return journal.Event{Type: t, Key: it.Key, UID: it.UID, ResourceVersion: it.ResourceVersion, Object: it.Object}
}

func tombstone(e journal.IndexEntry) journal.Event {
	return journal.Event{Type: journal.Deleted, Key: e.Key, UID: e.UID, ResourceVersion: e.ResourceVersion}
}

// gone is the tombstone of an entry whose name now has another UID: that
// object was deleted.
func gone(e journal.IndexEntry) journal.Event {
	t := tombstone(e)
	t.Reason = journal.ReasonGone
	return t
}

// sortedAfter reports whether items are strictly increasing by key and all
// greater than after ("" means no bound).
func sortedAfter(after string, items []Item) bool {
	prev, first := after, after == ""
	for _, it := range items {
		if !first && it.Key <= prev {
			return false
		}
		prev, first = it.Key, false
	}
	return true
}

// below reports whether resourceVersion a compares below b; false where
// they do not compare (KEP-5504: then only equality is known).
func below(a, b string) bool {
	cmp, err := resourceversion.CompareResourceVersion(a, b)
	return err == nil && cmp < 0
}
