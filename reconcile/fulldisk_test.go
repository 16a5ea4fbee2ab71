package reconcile_test

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/watchjournal/watchjournal/internal/testing/testenv"
	"github.com/watchjournal/watchjournal/journal"
	"github.com/watchjournal/watchjournal/reconcile"
)

// A full disk: the loop reports journal.ErrNoSpace, keeps what it had, and
// retries; when space returns the changes arrive, each once. The
// filesystem is a 4 MiB tmpfs (needs root; skipped otherwise, failed under
// make test).
func TestLoop_FullDisk_RetriesWithoutLoss(t *testing.T) {
	e := newEnv(t)
	dir := t.TempDir()
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size=4m", "tmpfs", dir).CombinedOutput(); err != nil {
		testenv.Unavailable(t, "cannot mount a size-limited tmpfs (needs root): %v %s", err, out)
	}
	t.Cleanup(func() { _ = exec.Command("umount", "-l", dir).Run() })
	e.path = filepath.Join(dir, "journal.db")
	e.create("a")
	h := e.startListed(nil, testOptions(t))

	// Fill the filesystem.
	filler := filepath.Join(dir, "filler")
	f, err := os.Create(filler)
	if err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 64<<10)
	for {
		if _, err := f.Write(buf); err != nil {
			break
		}
	}
	_ = f.Close()

	for i := 0; i < 20; i++ { // enough bytes to need new pages
		e.update("a")
	}
	e.create("b")
	e.waitStatus("ErrNoSpace", func(s reconcile.Status) bool { return errors.Is(s.LastError, journal.ErrNoSpace) })
	if got, _ := e.eventsFrom(h + 1); len(got) != 0 {
		// Some batches may have fit in free pages before the disk filled.
		t.Logf("events before the disk filled: %q", got)
	}
	_ = os.Remove(filler)
	e.waitStatus("recovered", func(s reconcile.Status) bool {
		st, _ := e.j.Stats()
		return s.LastError == nil && s.Phase == reconcile.PhaseWatching && st.Objects == 2
	})
	e.checkIndex(e.j)
	checkJournalConsistent(t, e.j)
}
