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
// or watch: a one-item list of full objects with shardSelector. The
// apiserver v1.37.2 with the gate on echoes the selector in the list's
// metadata.shardInfo (only in full lists: a PartialObjectMetadataList
// comes without it, so the probe asks for full objects); with the gate off
// it ignores the parameter and answers the whole collection without
// shardInfo: client mode. A server that refuses the selector (the
// apiserver answers 500 "invalid shard selector" for one it cannot parse)
// also means client mode. The client-side filter runs in both modes: in
// server mode it drops nothing, and the index holds only in-range keys
// even if the server's answer were wider.
//
// The pending part of a range that grew (journal.Writer.Reshard) is read
// at the start of every list: that list's ADDED for keys that hash into it
// are keys that moved in from another shard.

import (
	"context"
	"fmt"
	"strconv"
	"strings"

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

// detectShard finds the shard mode once (a no-op after): a one-item list
// of full objects with shardSelector; metadata.shardInfo in the answer
// means the apiserver filters. A refusal of the selector itself means
// client mode; any other error is returned for the loop's backoff.
func (l *Loop) detectShard(ctx context.Context) error {
	if l.c.shard.mode != ShardUnknown {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, l.opts.RequestTimeout)
	defer cancel()
	raw, err := l.c.selectors(l.c.rc.Get().AbsPath(l.c.path()...)).MaxRetries(0).
		Param("limit", strconv.Itoa(1)).Param("shardSelector", l.c.shard.sel).Do(ctx).Raw()
	mode := ShardClient
	switch {
	case err != nil && refusesShardSelector(err):
		l.log.Info("the apiserver refuses shardSelector: filtering on the client", "error", err)
	case err != nil:
		return fmt.Errorf("%w: detect shardSelector support: %w", ErrList, err)
	default:
		var lm struct {
			Metadata struct {
				ShardInfo *struct {
					Selector string `json:"selector"`
				} `json:"shardInfo"`
			} `json:"metadata"`
		}
		if err := jsonAPI.Unmarshal(raw, &lm); err != nil {
			return fmt.Errorf("%w: detect shardSelector support: %w", ErrList, err)
		}
		if lm.Metadata.ShardInfo != nil {
			mode = ShardServer
		}
	}
	l.c.shard.mode = mode
	l.update(func(x *Status) { x.ShardMode = mode })
	l.log.Info("shard mode", "mode", string(mode), "ranges", len(l.c.shard.set),
		"share", fmt.Sprintf("%.1f%%", 100*l.c.shard.set.Share()))
	return nil
}

// refusesShardSelector reports whether err is the apiserver refusing the
// shardSelector itself: a 400, or v1.37.2's 500 "invalid shard selector".
func refusesShardSelector(err error) bool {
	return (apierrors.IsBadRequest(err) || apierrors.IsInternalError(err) || apierrors.IsInvalid(err)) &&
		strings.Contains(err.Error(), "shard selector")
}
