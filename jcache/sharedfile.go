package jcache

// Two caches on one directory. The files of a directory are shared by the
// caches of a process that name it (feed.go's registry: one writer per
// file), so the first cache's options would be the file's, silently, for
// the second too: its retention, its fsyncs, its key. A second cache whose
// options differ in anything that decides what the file holds or how it
// is written is refused when it would share a file, with an error that
// names the option. Options that only concern the cache itself (Logger,
// Dir) are not compared.

import (
	"errors"
	"fmt"
	"reflect"
	"slices"
)

// ErrOptionsConflict is returned (wrapped in *OptionsConflictError) by an
// informer of a cache that would share a journal file with another cache
// of the process built with different Options.
var ErrOptionsConflict = errors.New("jcache: two caches on one directory with different options")

// OptionsConflictError names the file and the first option (a field of
// Options) whose values differ between the two caches.
type OptionsConflictError struct {
	Path   string // the journal file both would use
	Option string // e.g. "Retention", "NoSync", "KeyFiles"
}

func (e *OptionsConflictError) Error() string {
	return fmt.Sprintf("%v: %s: the caches differ in Options.%s (one process, one set of options per directory: give each cache its own Dir, or the same options)", ErrOptionsConflict, e.Path, e.Option)
}

// Unwrap returns ErrOptionsConflict.
func (e *OptionsConflictError) Unwrap() error { return ErrOptionsConflict }

// optionsConflict returns the first field of Options that decides a
// file's contents or writing and differs between a and b, or "".
func optionsConflict(a, b *Options) string {
	if a == b {
		return ""
	}
	switch {
	case a.SecretPayloads != b.SecretPayloads:
		return "SecretPayloads"
	case a.Keyring != b.Keyring && !(len(a.KeyFiles) > 0 && slices.Equal(a.KeyFiles, b.KeyFiles)):
		return "Keyring"
	case !slices.Equal(a.KeyFiles, b.KeyFiles):
		return "KeyFiles"
	case !slices.Equal(a.SealResources, b.SealResources):
		return "SealResources"
	case a.TransformID != b.TransformID:
		return "TransformID"
	case a.NoSync != b.NoSync:
		return "NoSync"
	case !reflect.DeepEqual(a.Retention, b.Retention):
		return "Retention"
	case a.NoSocket != b.NoSocket:
		return "NoSocket"
	case a.Loop.Wire != b.Loop.Wire:
		return "Loop.Wire"
	case a.Loop.SecretPayloads != b.Loop.SecretPayloads:
		return "Loop.SecretPayloads"
	}
	return ""
}
