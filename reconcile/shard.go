package reconcile

// A journal bound to a shard range (journal.Resource.ShardSelector,
// KEP-5866) holds only the keys whose UID hashes into the range, whichever
// way the apiserver answers:
//
//   - server mode: lists and watches carry shardSelector, and the apiserver
//     sends only the range's objects (feature gate ShardedListAndWatch,
//     alpha in v1.37);
//   - client mode: the apiserver does not serve the field, so the loop
//     lists and watches everything and drops what hashes outside the range
//     (the same FNV-1a, so a key lands in the same shard either way).
//
// The mode is detected, not assumed, once per Loop before its first list
// or watch (detectShard): a one-item list whose shardSelector matches no
// object in practice. The apiserver v1.37.2 with the gate on filters and
// echoes the selector in the list's metadata.shardInfo (in full lists
// only: a PartialObjectMetadataList comes without it, so a metadata-only
// journal's probe tells by the items); with the gate off it ignores the
// parameter and answers the whole collection without shardInfo: client
// mode. A server that refuses the selector (the apiserver answers 500
// "invalid shard selector" for one it cannot parse) also means client
// mode. The client-side filter runs in both modes: in
// server mode it drops nothing, and the index holds only in-range keys
// even if the server's answer were wider.
//
// The pending part of a range that grew (journal.Writer.Reshard) is read
// at the start of every list: that list's ADDED for keys that hash into it
// are keys that moved in from another shard.
//
// A range taken over from a member that died (package shards) comes with
// that member's last published index (Options.Inherited: keys, UIDs and
// resourceVersions of the part it held). The first list that commits after
// the loop began at an empty resourceVersion diffs against it as if the
// journal had held it, three ways (inheritStage, inheritTail):
//
//   - a listed key inherited with its UID and resourceVersion: ADDED,
//     reason moved (the previous owner journaled it as it is);
//   - inherited with its UID and another resourceVersion: MODIFIED
//     (PrevResourceVersion the inherited one): changed while no journal
//     watched it;
//   - inherited with another UID: DELETED (the inherited UID, reason gone)
//     then ADDED;
//   - a key of the inherited range not inherited: ADDED, no reason
//     (created while no journal watched);
//   - an inherited key not listed: DELETED, a tombstone of the inherited
//     entry, its reason asked of the server as for any tombstone
//     (reason.go).
//
// An inherited key that the journal's own index holds (the same name
// under a UID of the journal's own range) is left to the index's diff: a
// tombstone for the inherited UID would remove the journal's entry.

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/watchjournal/watchjournal/internal/hashrange"
	"github.com/watchjournal/watchjournal/journal"
)

// ShardMode says how a sharded loop keeps to its range.
type ShardMode string

// Shard modes.
const (
	// ShardNone: the journal is not sharded.
	ShardNone ShardMode = ""
	// ShardUnknown: sharded, the mode not yet detected.
	ShardUnknown ShardMode = "detecting"
	// ShardServer: the apiserver filters (shardSelector).
	ShardServer ShardMode = "server"
	// ShardClient: the apiserver does not serve shardSelector; the loop
	// filters what it lists and watches.
	ShardClient ShardMode = "client"
)

// shard is a client's range and mode.
type shard struct {
	set  hashrange.Set // nil: unsharded
	sel  string
	mode ShardMode
}

// newShard parses a journal's shard selector.
func newShard(sel string) (shard, error) {
	if sel == "" {
		return shard{}, nil
	}
	set, err := hashrange.Parse(sel)
	if err != nil {
		return shard{}, fmt.Errorf("%w: %v", ErrInvalidSelector, err)
	}
	return shard{set: set, sel: set.Selector(), mode: ShardUnknown}, nil
}

// in reports whether an object of this UID belongs to the journal.
func (s *shard) in(uid string) bool { return s.set == nil || s.set.ContainsUID(uid) }

// filter returns the items of the range, items itself when all are.
func (s *shard) filter(items []Item) []Item {
	out := func(it Item) bool { return !s.in(it.UID) }
	if s.set == nil || !slices.ContainsFunc(items, out) {
		return items
	}
	return slices.DeleteFunc(slices.Clone(items), out)
}

// param returns the shardSelector to send, "" for none.
func (s *shard) param() string {
	if s.mode == ShardServer {
		return s.sel
	}
	return ""
}

// probeRange is the first hash alone, [0, 1): no object in practice (a
// UID hashes to it with probability 2^-64), so a server that filters
// answers a probe with it with no item, and one that ignores it with any.
var probeRange = hashrange.Set{{First: 0, Last: 0}}

// detectShard finds the shard mode once (a no-op after), without asking
// for any object of the journal's range: a one-item list with
// shardSelector probeRange (metadata only for a metadata-only journal, so
// a Secret's data never comes). metadata.shardInfo in the answer (full
// lists only), or no item while a list without the selector has one, means
// the apiserver filters: server mode. An item outside probeRange means it
// ignored the parameter, and a refusal of the selector itself that it does
// not serve it: client mode; so does an empty collection, where the two
// cannot be told apart (the next Loop, after a range change or a restart,
// asks again). Any other error is returned for the loop's backoff.
func (l *Loop) detectShard(ctx context.Context) error {
	if l.c.shard.mode != ShardUnknown {
		return nil
	}
	uids, info, err := l.c.shardProbe(ctx, probeRange.Selector(), l.opts.RequestTimeout)
	mode, why := ShardClient, "the apiserver ignores shardSelector"
	switch {
	case err != nil && refusesShardSelector(err):
		why = "the apiserver refuses shardSelector: " + err.Error()
	case err != nil:
		return fmt.Errorf("%w: detect shardSelector support: %w", ErrList, err)
	case info:
		mode, why = ShardServer, "the apiserver echoes shardSelector (shardInfo)"
	case len(uids) > 0 && !probeRange.ContainsUID(uids[0]):
	default:
		all, _, err := l.c.shardProbe(ctx, "", l.opts.RequestTimeout)
		switch {
		case err != nil:
			return fmt.Errorf("%w: detect shardSelector support: %w", ErrList, err)
		case len(all) > 0:
			mode, why = ShardServer, "the apiserver filters by shardSelector"
		default:
			why = "an empty collection: cannot tell whether the apiserver serves shardSelector"
		}
	}
	l.c.shard.mode = mode
	l.update(func(x *Status) { x.ShardMode = mode })
	l.log.Info("shard mode", "mode", string(mode), "why", why, "ranges", len(l.c.shard.set),
		"share", fmt.Sprintf("%.1f%%", 100*l.c.shard.set.Share()))
	return nil
}

// shardProbe lists one object with shardSelector sel (none when empty),
// metadata only for a metadata-only journal, and returns the UIDs listed
// and whether the answer carries metadata.shardInfo.
func (c *client) shardProbe(ctx context.Context, sel string, timeout time.Duration) ([]string, bool, error) {
	r := c.selectors(c.get(c.rc, c.res.Namespace)).Param("limit", "1")
	if sel != "" {
		r = r.Param("shardSelector", sel)
	}
	if c.res.MetadataOnly {
		r = r.SetHeader("Accept", onlyMetaListAccept)
	}
	var lm metav1.PartialObjectMetadataList // of any list: metadata is all it reads
	if err := getJSON(ctx, r, timeout, &lm); err != nil {
		return nil, false, err
	}
	var uids []string
	for _, it := range lm.Items {
		uids = append(uids, string(it.UID))
	}
	return uids, lm.ShardInfo != nil, nil
}

// refusesShardSelector reports whether err is the apiserver refusing the
// shardSelector itself: a 400, or v1.37.2's 500 "invalid shard selector".
func refusesShardSelector(err error) bool {
	return (apierrors.IsBadRequest(err) || apierrors.IsInternalError(err) || apierrors.IsInvalid(err)) &&
		strings.Contains(err.Error(), "shard selector")
}

// Inheritance is what the previous owners of part of a journal's pending
// shard range held when they stopped journaling (package shards reads it
// from their published index): the first list of a Loop that begins at an
// empty resourceVersion diffs against it (this file's comment).
type Inheritance struct {
	// Range is the part of the UID hash space Entries cover, as a
	// KEP-5866 shardSelector (shardRange(object.metadata.uid, '0x…',
	// '0x…') terms joined by ||, as shards publishes it): every key the
	// previous owners held there, and no key outside it. Empty: none.
	Range string
	// Entries are the previous owners' index entries in Range, sorted by
	// key, strictly increasing.
	Entries []journal.IndexEntry
}

// inheritState is an Inheritance as one list uses it.
type inheritState struct {
	*Inheritance
	set  hashrange.Set // Range parsed
	seen []bool        // by entry: listed, or its tombstone staged
}

// covers reports whether uid hashes into the inherited range; false for a
// nil state.
func (s *inheritState) covers(uid string) bool {
	return s != nil && s.set.ContainsUID(uid)
}

// find returns the index of key's entry, -1 when none.
func (s *inheritState) find(key string) int {
	i, ok := slices.BinarySearchFunc(s.Entries, key, func(e journal.IndexEntry, key string) int { return strings.Compare(e.Key, key) })
	if !ok {
		return -1
	}
	return i
}

// readPending reads the journal's pending shard ranges at the start of a
// list, and arms Options.Inherited for it while the journal's
// resourceVersion is empty: no list has committed since the range grew, so
// no journal holds the inherited range's events yet.
func (l *Loop) readPending() error {
	sel, err := l.w.ShardPending()
	if err != nil {
		return err
	}
	if l.pending, err = hashrange.ParseOrEmpty(sel); err != nil {
		return err
	}
	l.inherit = nil
	if in := l.opts.Inherited; in != nil && in.Range != "" {
		rv, err := l.j.ResourceVersion()
		if err != nil {
			return err
		}
		if rv == "" {
			set, _ := hashrange.Parse(in.Range) // checked by New
			l.inherit = &inheritState{Inheritance: in, set: set, seen: make([]bool, len(in.Entries))}
		}
	}
	return nil
}

// inheritStage rewrites a list's ADDED for inherited keys (this file's
// comment) and marks the inherited keys it meets as listed. It returns evs,
// with a tombstone inserted before the ADDED of a key whose UID changed.
func (l *Loop) inheritStage(evs []journal.Event) []journal.Event {
	s := l.inherit
	if s == nil {
		return evs
	}
	var out []journal.Event // nil until an event is inserted
	for i := range evs {
		e := &evs[i]
		k := s.find(e.Key)
		if k >= 0 && !s.seen[k] {
			s.seen[k] = true
			prev := s.Entries[k]
			if e.Type == journal.Added {
				switch {
				case prev.UID != e.UID:
					if out == nil {
						out = append(make([]journal.Event, 0, len(evs)+1), evs[:i]...)
					}
					out = append(out, gone(prev))
				case prev.ResourceVersion == e.ResourceVersion:
					e.Reason = journal.ReasonMoved
				default:
					e.Type, e.PrevResourceVersion = journal.Modified, prev.ResourceVersion
				}
			}
		}
		if out != nil {
			out = append(out, *e)
		}
	}
	if out == nil {
		return evs
	}
	return out
}

// inheritTail stages, at the end of a list at rv, a tombstone for every
// inherited key the list did not contain and the journal's index does not
// hold, with the reason the confirmer finds (reason.go).
func (r *relist) inheritTail(ctx context.Context, rv string) error {
	l, s := r.l, r.l.inherit
	if s == nil {
		return nil
	}
	chunk := int(l.opts.PageSize)
	var evs []journal.Event
	flush := func() error {
		if len(evs) == 0 {
			return nil
		}
		if err := r.cf.reasons(ctx, evs, rv); err != nil {
			return err
		}
		err := r.stage(evs)
		evs = nil
		return err
	}
	for k, e := range s.Entries {
		if s.seen[k] {
			continue
		}
		s.seen[k] = true
		if _, held, err := l.j.Lookup(e.Key); err != nil {
			return journalError{err}
		} else if held {
			continue
		}
		evs = append(evs, tombstone(e))
		if len(evs) >= chunk {
			if err := flush(); err != nil {
				return err
			}
		}
	}
	return flush()
}
