package compactor

import (
	"errors"
	"fmt"
	"os"
	"time"

	bbolt "go.etcd.io/bbolt"
	bberrors "go.etcd.io/bbolt/errors"

	"github.com/watchjournal/watchjournal/journal"
)

// CompactFile rewrites the journal file src into dst (which must not exist)
// with bbolt's compaction, so that pages freed by retention go back to the
// filesystem, and returns both sizes in bytes. The writer must be stopped:
// src is opened read-only and a running writer makes it fail with
// journal.ErrLocked. Replace src with dst (rename) to finish. dst is
// written with its freelist synced, like every file package journal
// writes.
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
	in, err := bbolt.Open(src, 0o600, &bbolt.Options{ReadOnly: true, Timeout: time.Second})
	if errors.Is(err, bberrors.ErrTimeout) {
		return 0, 0, fmt.Errorf("%w: %s", journal.ErrLocked, src)
	}
	if err != nil {
		return 0, 0, fmt.Errorf("compactor: open %s: %w", src, err)
	}
	defer in.Close()
	// The freelist is synced, as package bolt's Store writes it: without
	// it, the next open rebuilds it by walking every page in a goroutine
	// of bbolt's, where a corrupt page panics beyond any recover.
	out, err := bbolt.Open(dst, 0o600, &bbolt.Options{NoFreelistSync: false, FreelistType: bbolt.FreelistMapType})
	if err != nil {
		return 0, 0, fmt.Errorf("compactor: create %s: %w", dst, err)
	}
	if err := bbolt.Compact(out, in, 64<<20); err != nil {
		_ = out.Close()
		_ = os.Remove(dst)
		return 0, 0, fmt.Errorf("compactor: compact: %w", err)
	}
	if err := out.Close(); err != nil {
		return 0, 0, err
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
