package compactor

// The offline file rewrite (journalctl compact) is journal/bolt's: the
// copy, the rename over the file and the fsyncs (bolt.Rewrite). These are
// its names in the compactor's API.

import "github.com/watchjournal/watchjournal/journal/bolt"

// CompactFile rewrites the journal file src into dst (which must not exist)
// compacted, so that pages freed by retention go back to the filesystem,
// and returns both sizes in bytes. The writer must be stopped: src is
// opened read-only and a running writer makes it fail with
// journal.ErrLocked; a file that is not a journal file this build reads
// fails with Open's errors (journal.ErrCorrupt, ErrForeign, …). Rewrite
// replaces src with its copy; CompactFile leaves both. dst is written
// with its freelist synced, like every file package journal writes.
func CompactFile(src, dst string) (before, after int64, err error) {
	return bolt.Compact(src, dst)
}

// RewriteOptions configure Rewrite (bolt.RewriteOptions: KeepBackup). A
// nil *RewriteOptions means the defaults.
type RewriteOptions = bolt.RewriteOptions

// Rewrite rewrites the journal file at path compacted (CompactFile into
// <path>.compact) and renames the copy over it, with the file's
// permissions, then syncs the directory; it returns both sizes in bytes.
// The writer must be stopped: Rewrite holds the file's writer lock
// (bolt.LockWriter) through the copy and the rename, so a running writer
// makes it fail with journal.ErrLocked and none starts meanwhile. A
// <path>.compact left by a
// rewrite that was killed is removed first, unless a running rewrite still
// writes it (an error). On any later error the copy is
// removed and the file is as it was, unless the rename happened.
func Rewrite(path string, opts *RewriteOptions) (before, after int64, err error) {
	if opts == nil {
		opts = &RewriteOptions{}
	}
	return bolt.Rewrite(path, *opts)
}
