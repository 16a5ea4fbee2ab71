package compactor

// The file rewrite (journalctl compact): a compacted copy beside the file
// (journal/bolt's Compact), then the rename over it, as the file's owner
// would do it by hand: the copy takes the file's permissions, the old file
// may stay as a hard link, and the directory is synced so that the rename
// survives a crash. Every caller gets the rename and the fsyncs from here.

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/watchjournal/watchjournal/journal"
	"github.com/watchjournal/watchjournal/journal/bolt"
)

// CompactFile rewrites the journal file src into dst (which must not exist)
// with bbolt's compaction, so that pages freed by retention go back to the
// filesystem, and returns both sizes in bytes. The writer must be stopped:
// src is opened read-only and a running writer makes it fail with
// journal.ErrLocked. Rewrite replaces src with its copy; CompactFile leaves
// both. dst is written with its freelist synced, like every file package
// journal writes.
func CompactFile(src, dst string) (before, after int64, err error) {
	// Check it is a journal we can read (typed errors), then release it.
	j, err := journal.Open(src, &journal.Options{ReadOnly: true, Timeout: -1})
	if err != nil {
		return 0, 0, err
	}
	_ = j.Close()
	if _, err := os.Stat(dst); err == nil {
		return 0, 0, fmt.Errorf("compactor: %s exists", dst)
	}
	if err := bolt.Compact(src, dst); errors.Is(err, journal.ErrLocked) {
		return 0, 0, err
	} else if err != nil {
		return 0, 0, fmt.Errorf("compactor: %w", err)
	}
	si, err := os.Stat(src)
	if err != nil {
		return 0, 0, err
	}
	so, err := os.Stat(dst)
	if err != nil {
		return 0, 0, err
	}
	return si.Size(), so.Size(), nil
}

// RewriteOptions configure Rewrite. A nil *RewriteOptions means the
// defaults.
type RewriteOptions struct {
	// KeepBackup keeps the old file as <path>.bak (a hard link, replacing
	// one left before).
	KeepBackup bool
}

// Rewrite rewrites the journal file at path compacted (CompactFile into
// <path>.compact) and renames the copy over it, with the file's
// permissions, then syncs the directory; it returns both sizes in bytes.
// The writer must be stopped, as for CompactFile; a caller that must keep
// writers out through the rename holds journal.LockWriter. A <path>.compact
// left by a rewrite that was killed is removed first, unless a running
// rewrite still writes it (an error). On any later error the copy is
// removed and the file is as it was, unless the rename happened.
func Rewrite(path string, opts *RewriteOptions) (before, after int64, err error) {
	if opts == nil {
		opts = &RewriteOptions{}
	}
	dst := path + ".compact"
	if err := removeStale(dst); err != nil {
		return 0, 0, err
	}
	before, after, err = CompactFile(path, dst)
	if err == nil {
		err = replace(path, dst, opts.KeepBackup)
	}
	if err != nil {
		_ = os.Remove(dst)
		return 0, 0, err
	}
	return before, after, nil
}

// removeStale removes dst, left by a rewrite that was killed, unless
// another rewrite still writes it (bbolt holds its lock).
func removeStale(dst string) error {
	if _, err := os.Stat(dst); errors.Is(err, os.ErrNotExist) {
		return nil
	}
	// A torn or foreign file does not open, and is stale all the same: the
	// lock is all we ask.
	s, err := bolt.Open(dst, bolt.Options{ReadOnly: true, Timeout: 10 * time.Millisecond})
	if errors.Is(err, journal.ErrLocked) {
		return fmt.Errorf("%s is being written by another compact", dst)
	}
	if err == nil {
		_ = s.Close()
	}
	return os.Remove(dst)
}

// replace renames dst over path, with path's permissions (synced), after
// linking path to path.bak when keepBackup is set; then it syncs the
// directory so that the rename is durable.
func replace(path, dst string, keepBackup bool) error {
	fi, err := os.Stat(path)
	if err != nil {
		return err
	}
	if err := os.Chmod(dst, fi.Mode().Perm()); err != nil {
		return err
	}
	if err := syncFile(dst); err != nil { // bbolt synced the data; this the mode
		return err
	}
	if keepBackup {
		bak := path + ".bak"
		if err := os.Remove(bak); err != nil && !errors.Is(err, os.ErrNotExist) {
			return err
		}
		if err := os.Link(path, bak); err != nil {
			return fmt.Errorf("keep backup: %w", err)
		}
	}
	if err := os.Rename(dst, path); err != nil {
		return err
	}
	return syncFile(filepath.Dir(path))
}

// syncFile fsyncs the file or directory at path.
func syncFile(path string) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	return errors.Join(f.Sync(), f.Close())
}
