package bolt

// The offline file rewrite (journalctl compact, compactor.Rewrite): bbolt's
// own compaction of the file into a new one beside it, which holds the same
// buckets and keys in pages packed full, so that the pages retention freed
// go back to the filesystem; then the rename over the file, as its owner
// would do it by hand: the copy takes the file's permissions and is synced,
// the old file may stay as a hard link, and the directory is synced so
// that the rename survives a crash. Every caller gets the copy, the rename
// and the fsyncs from here, and none opens bbolt itself.

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	bbolt "go.etcd.io/bbolt"
	bberrors "go.etcd.io/bbolt/errors"

	"github.com/watchjournal/watchjournal/internal/storage"
)

// RewriteOptions configure Rewrite.
type RewriteOptions struct {
	// KeepBackup keeps the old file as <path>.bak (a hard link, replacing
	// one left before).
	KeepBackup bool
}

// Rewrite rewrites the file at path compacted (Compact into
// <path>.compact) and renames the copy over it, with the file's
// permissions, then syncs the directory; it returns both sizes in bytes.
// The file must be a watchjournal file this build reads (Open's errors,
// read-only) and its writer stopped. Rewrite holds the writer's lock
// (LockWriter) from before the copy until after the rename, so a running
// writer makes it fail with ErrLocked at once, and no writer opens the file
// meanwhile: a writer that reopened its file in the rename's moment would
// go on writing the replaced one. A <path>.compact left by a rewrite that
// was killed is removed first, unless a running rewrite still writes it
// (an error). On any later error the copy is removed and the file is as it
// was, unless the rename happened.
func Rewrite(path string, o RewriteOptions) (before, after int64, err error) {
	release, err := LockWriter(path, 0)
	if err != nil {
		return 0, 0, err
	}
	defer release()
	dst := path + ".compact"
	if err := removeStale(dst); err != nil {
		return 0, 0, err
	}
	before, after, err = Compact(path, dst)
	if err == nil {
		err = replace(path, dst, o.KeepBackup)
	}
	if err != nil {
		_ = os.Remove(dst)
		return 0, 0, err
	}
	return before, after, nil
}

// Compact writes a compacted copy of the file src into dst, which must not
// exist, and returns both sizes in bytes; Rewrite then renames it over src,
// Compact leaves both. src must be a watchjournal file this build reads
// (Open's errors, read-only, one try) and its writer stopped: a running
// writer makes it fail with ErrLocked. dst is written with its freelist
// synced, like every file Open writes. Errors of the copy other than
// ErrLocked carry the prefix "rewrite: ".
func Compact(src, dst string) (before, after int64, err error) {
	s, err := open(src, Options{ReadOnly: true, Timeout: -1})
	if err != nil {
		return 0, 0, err
	}
	_ = s.Close()
	if _, err := os.Stat(dst); err == nil {
		return 0, 0, fmt.Errorf("rewrite: %s exists", dst)
	}
	// src read-only: a writer that holds it makes it fail after 1 s.
	in, err := bbolt.Open(src, 0o600, &bbolt.Options{ReadOnly: true, Timeout: time.Second})
	if errors.Is(err, bberrors.ErrTimeout) {
		return 0, 0, fmt.Errorf("%w: %s", storage.ErrLocked, src)
	}
	if err != nil {
		return 0, 0, fmt.Errorf("rewrite: open %s: %w", src, err)
	}
	defer in.Close()
	// The freelist is synced, as Open writes it: without it, the next open
	// rebuilds it by walking every page in a goroutine of bbolt's, where a
	// corrupt page panics beyond any recover.
	out, err := bbolt.Open(dst, 0o600, &bbolt.Options{NoFreelistSync: false, FreelistType: bbolt.FreelistMapType})
	if err != nil {
		return 0, 0, fmt.Errorf("rewrite: create %s: %w", dst, err)
	}
	if err := bbolt.Compact(out, in, 64<<20); err != nil {
		_ = out.Close()
		_ = os.Remove(dst)
		return 0, 0, fmt.Errorf("rewrite: compact: %w", err)
	}
	if err := out.Close(); err != nil { // every transaction of Compact committed with fsync
		return 0, 0, fmt.Errorf("rewrite: %w", err)
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

// removeStale removes dst, left by a rewrite that was killed, unless
// another rewrite still writes it (bbolt holds its lock).
func removeStale(dst string) error {
	if _, err := os.Stat(dst); errors.Is(err, os.ErrNotExist) {
		return nil
	}
	// A torn or foreign file does not open, and is stale all the same: the
	// lock is all we ask.
	s, err := open(dst, Options{ReadOnly: true, Timeout: 10 * time.Millisecond})
	if errors.Is(err, storage.ErrLocked) {
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
