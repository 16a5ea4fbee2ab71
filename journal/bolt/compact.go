package bolt

// The copy at the heart of a file rewrite (journalctl compact): bbolt's own
// compaction of one file into a new one, which holds the same buckets and
// keys in pages packed full, so that the pages retention freed go back to
// the filesystem. The rename over the old file, the backup and the fsyncs
// around them are package compactor's (compactor.Rewrite), which needs no
// bbolt for them.

import (
	"errors"
	"fmt"
	"os"
	"time"

	bbolt "go.etcd.io/bbolt"
	bberrors "go.etcd.io/bbolt/errors"

	"github.com/watchjournal/watchjournal/internal/storage"
)

// Compact writes a compacted copy of the database file src into dst, a
// new file (mode 0600), and syncs it. src is opened read-only: a writer
// that holds it makes Compact fail with storage.ErrLocked after 1 s. dst is
// written with its freelist synced, as Open writes every file. On an error
// the caller removes dst. Errors other than storage.ErrLocked carry no package
// prefix ("create <dst>: …", "compact: …"): they are the rewrite's, which
// the caller names.
func Compact(src, dst string) error {
	in, err := bbolt.Open(src, 0o600, &bbolt.Options{ReadOnly: true, Timeout: time.Second})
	if errors.Is(err, bberrors.ErrTimeout) {
		return fmt.Errorf("%w: %s", storage.ErrLocked, src)
	}
	if err != nil {
		return fmt.Errorf("open %s: %w", src, err)
	}
	defer in.Close()
	// The freelist is synced, as Open writes it: without it, the next open
	// rebuilds it by walking every page in a goroutine of bbolt's, where a
	// corrupt page panics beyond any recover.
	out, err := bbolt.Open(dst, 0o600, &bbolt.Options{NoFreelistSync: false, FreelistType: bbolt.FreelistMapType})
	if err != nil {
		return fmt.Errorf("create %s: %w", dst, err)
	}
	if err := bbolt.Compact(out, in, 64<<20); err != nil {
		_ = out.Close()
		_ = os.Remove(dst)
		return fmt.Errorf("compact: %w", err)
	}
	return out.Close() // every transaction of Compact committed with fsync
}
