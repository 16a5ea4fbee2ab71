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

import (
	"context"
	"fmt"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"github.com/watchjournal/watchjournal/shards/hashrange"
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
	if s.set == nil {
		return items
	}
	var out []Item
	for i, it := range items {
		if !s.in(it.UID) {
			if out == nil {
				out = append(make([]Item, 0, len(items)), items[:i]...)
			}
			continue
		}
		if out != nil {
			out = append(out, it)
		}
	}
	if out == nil {
		return items
	}
	return out
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
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	r := c.selectors(c.rc.Get().AbsPath(c.path()...)).MaxRetries(0).Param("limit", "1")
	if sel != "" {
		r = r.Param("shardSelector", sel)
	}
	if c.metadataOnly {
		r = r.SetHeader("Accept", onlyMetaListAccept)
	}
	raw, err := r.Do(ctx).Raw()
	if err != nil {
		return nil, false, err
	}
	var lm struct {
		Metadata struct {
			ShardInfo *struct {
				Selector string `json:"selector"`
			} `json:"shardInfo"`
		} `json:"metadata"`
		Items []rawMeta `json:"items"`
	}
	if err := jsonAPI.Unmarshal(raw, &lm); err != nil {
		return nil, false, err
	}
	var uids []string
	for _, it := range lm.Items {
		uids = append(uids, it.Metadata.UID)
	}
	return uids, lm.Metadata.ShardInfo != nil, nil
}

// refusesShardSelector reports whether err is the apiserver refusing the
// shardSelector itself: a 400, or v1.37.2's 500 "invalid shard selector".
func refusesShardSelector(err error) bool {
	return (apierrors.IsBadRequest(err) || apierrors.IsInternalError(err) || apierrors.IsInvalid(err)) &&
		strings.Contains(err.Error(), "shard selector")
}
