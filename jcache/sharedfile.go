package jcache

// Two caches on one directory. The files of a directory are shared by the
// caches of a process that name it (feed.go's registry: one writer per
// file), so the first cache's options would be the file's, silently, for
// the second too: its retention, its fsyncs, its key, its shard member's
// range. A second cache whose options differ in anything that decides
// what that file holds or how it is written is refused when it would
// share the file, with an error that names the option. What has no effect
// on the file is not compared: options that only concern the cache itself
// (Logger, Dir), the deprecated SecretPayloads and Loop.SecretPayloads
// (feed.go sets it), the key (Keyring, KeyFiles) of a file neither cache
// seals, and SealResources but for whether this file seals. Options are
// compared as they take effect: a nil Retention is DefaultRetention, an
// empty Shard.Member is shards.DefaultMember().
//
// A ranged file (ShardOptions.Owners, feedrange.go) journals one member's
// range, and its name carries the group but not the member: two caches of
// one group with different Members would share it, and the second would
// be served the first member's range, never its own. Its name stays as it
// is, so that a replica's file survives a restart under a new Member (a
// pod's host name and pid change; its volume stays), and two members in
// one process on one directory are refused (OptionsConflictError naming
// Shard.Member): give each its own Dir, as each replica has its own.

import (
	"cmp"
	"errors"
	"fmt"
	"slices"

	"github.com/watchjournal/watchjournal/journal"
	"github.com/watchjournal/watchjournal/shards"
)

// ErrOptionsConflict is returned (wrapped in *OptionsConflictError) by an
// informer of a cache that would share a journal file with another cache
// of the process built with different Options.
var ErrOptionsConflict = errors.New("jcache: two caches on one directory with different options")

// OptionsConflictError names the file and the first option (a field of
// Options) whose values differ between the two caches.
type OptionsConflictError struct {
	Path   string // the journal file both would use
	Option string // e.g. "Retention", "NoSync", "KeyFiles", "Shard.Member"
}

// Error names the file and the option, and what to do.
func (e *OptionsConflictError) Error() string {
	return fmt.Sprintf("%v: %s: the caches differ in Options.%s (one process, one set of options per directory: give each cache its own Dir, or the same options)", ErrOptionsConflict, e.Path, e.Option)
}

// Unwrap returns ErrOptionsConflict.
func (e *OptionsConflictError) Unwrap() error { return ErrOptionsConflict }

// optionsConflict returns the first field of Options that decides the
// contents or writing of the file of res (ranged: a shard group's file of
// its range) and differs between a and b, or "".
func optionsConflict(a, b *Options, res journal.Resource, ranged bool) string {
	if a == b {
		return ""
	}
	sealA, sealB := seals(a, res), seals(b, res)
	ra, _ := a.policy()
	rb, _ := b.policy()
	switch {
	case sealA != sealB:
		return "SealResources"
	case sealA && a.Keyring != b.Keyring && !(len(a.KeyFiles) > 0 && slices.Equal(a.KeyFiles, b.KeyFiles)):
		return "Keyring"
	case sealA && !slices.Equal(a.KeyFiles, b.KeyFiles):
		return "KeyFiles"
	case a.TransformID != b.TransformID:
		return "TransformID"
	case a.NoSync != b.NoSync:
		return "NoSync"
	case ra != rb:
		return "Retention"
	case a.NoSocket != b.NoSocket:
		return "NoSocket"
	case a.Loop.Wire != b.Loop.Wire:
		return "Loop.Wire"
	case ranged && shardMember(a) != shardMember(b):
		return "Shard.Member"
	}
	return ""
}

// seals reports whether a file of res opened with o seals its objects,
// as journal.Options.SealResources decides it.
func seals(o *Options, res journal.Resource) bool {
	gr := res.GVR.GroupResource()
	return !res.MetadataOnly && (slices.Contains(journal.DefaultSealResources, gr) || slices.Contains(o.SealResources, gr))
}

// shardMember returns the member o's cache is in its shard group, "" for
// none.
func shardMember(o *Options) string {
	if o.Shard == nil {
		return ""
	}
	return cmp.Or(o.Shard.Member, shards.DefaultMember())
}
