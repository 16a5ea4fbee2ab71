package journal_test

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/watchjournal/watchjournal/internal/testing/testenv"
	"github.com/watchjournal/watchjournal/journal"
)

func payload(n int) []byte { return []byte(`{"d":"` + strings.Repeat("x", n) + `"}`) }

// A full disk fails the write with ErrNoSpace and keeps everything committed
// before; once there is space again, writes succeed. The filesystem is a
// 2 MiB tmpfs (needs root; skipped otherwise, failed under make test).
func TestJournal_FullDisk_TypedErrorLosesNothing(t *testing.T) {
	dir := t.TempDir()
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size=2m", "tmpfs", dir).CombinedOutput(); err != nil {
		testenv.Unavailable(t, "cannot mount a size-limited tmpfs (needs root): %v %s", err, out)
	}
	t.Cleanup(func() { _ = exec.Command("umount", dir).Run() })
	j := open(t, filepath.Join(dir, "j.db"))
	appendEvents(t, j, "1", ev(journal.Added, "wj/a", "u", "1"))
	before, _ := j.Stats()

	var err error
	for i := 0; i < 100 && err == nil; i++ {
		err = j.Writer().Update(func(tx *journal.Tx) error {
			e := journal.Event{Type: journal.Modified, Key: "wj/a", UID: "u", ResourceVersion: "x", Object: payload(100 << 10), Origin: journal.OriginWatch}
			for k := 0; k < 5; k++ {
				if _, err := tx.Append(&e); err != nil {
					return err
				}
			}
			return tx.SetResourceVersion("never")
		})
		if err == nil {
			before, _ = j.Stats()
		}
	}
	if !errors.Is(err, journal.ErrNoSpace) {
		t.Fatalf("writing past a full disk = %v; want ErrNoSpace", err)
	}
	after, err2 := j.Stats()
	if err2 != nil || after.LastOffset != before.LastOffset || after.ResourceVersion != before.ResourceVersion {
		t.Fatalf("after ErrNoSpace stats = %+v, %v; want the last committed state %+v", after, err2, before)
	}
	if r, err := j.Check(); err != nil || !r.OK() {
		t.Fatalf("Check after ErrNoSpace = %+v, %v", r, err)
	}
}

// A truncated file and a file with garbage in its middle are refused or
// reported as corrupt: no panic, no partial state.
func TestJournal_DamagedFiles(t *testing.T) {
	build := func(t *testing.T) string {
		path := filepath.Join(t.TempDir(), "j.db")
		j, err := journal.Open(path, &journal.Options{Resource: &cm})
		if err != nil {
			t.Fatal(err)
		}
		for i := 0; i < 20; i++ {
			appendEvents(t, j, "1", ev(journal.Added, "wj/k"+strings.Repeat("x", i), "u", "1"))
		}
		big := ev(journal.Modified, "wj/k", "u", "2")
		big.Object = payload(64 << 10)
		appendEvents(t, j, "2", big)
		_ = j.Close()
		return path
	}
	t.Run("truncated to half is ErrCorrupt", func(t *testing.T) {
		path := build(t)
		fi, _ := os.Stat(path)
		_ = os.Truncate(path, fi.Size()/2)
		_, err := journal.Open(path, nil)
		if !errors.Is(err, journal.ErrCorrupt) {
			t.Fatalf("Open(truncated) = %v; want ErrCorrupt", err)
		}
	})
	t.Run("truncated to a few bytes is ErrCorrupt", func(t *testing.T) {
		path := build(t)
		_ = os.Truncate(path, 100)
		if _, err := journal.Open(path, nil); !errors.Is(err, journal.ErrCorrupt) {
			t.Fatalf("Open(100 bytes) = %v; want ErrCorrupt", err)
		}
	})
	t.Run("garbage in data pages is found by Check or refused", func(t *testing.T) {
		path := build(t)
		f, _ := os.OpenFile(path, os.O_RDWR, 0)
		fi, _ := f.Stat()
		junk := []byte(strings.Repeat("\xde\xad\xbe\xef", 1024))
		for off := int64(4 * os.Getpagesize()); off < fi.Size(); off += 2 * int64(os.Getpagesize()) {
			_, _ = f.WriteAt(junk, off)
		}
		_ = f.Close()
		j, err := journal.Open(path, &journal.Options{ReadOnly: true})
		if err != nil {
			if !errors.Is(err, journal.ErrCorrupt) {
				t.Fatalf("Open(garbage) = %v; want ErrCorrupt", err)
			}
			return
		}
		defer j.Close()
		r, err := j.Check()
		if err == nil && r.OK() {
			t.Fatalf("Check of a damaged file = %+v; want problems", r)
		}
		if _, err := j.Read(1, 100); err != nil && !errors.Is(err, journal.ErrCorrupt) && !errors.Is(err, journal.ErrBadRecord) {
			t.Fatalf("Read of a damaged file = %v; want ErrCorrupt or ErrBadRecord", err)
		}
	})
}

func TestJournal_Check_SoundFile(t *testing.T) {
	j := open(t, filepath.Join(t.TempDir(), "j.db"))
	appendEvents(t, j, "3", ev(journal.Added, "wj/a", "u1", "1"), ev(journal.Modified, "wj/a", "u1", "2"),
		ev(journal.Deleted, "wj/a", "u1", "3"), ev(journal.Added, "wj/a", "u2", "4"))
	r, err := j.Check()
	if err != nil || !r.OK() || !r.Replayed || r.Events != 4 || r.Objects != 1 {
		t.Fatalf("Check = %+v, %v; want OK, replayed, 4 events, 1 object", r, err)
	}
}

// Random damage, many times over: whatever bytes are overwritten, Open,
// Check, Read and ScanIndex return errors, never panic or hang.
func TestJournal_RandomDamage_NeverPanics(t *testing.T) {
	dir := t.TempDir()
	src := filepath.Join(dir, "src.db")
	j, err := journal.Open(src, &journal.Options{Resource: &cm, NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 300; i++ {
		e := ev(journal.Added, "wj/k"+strings.Repeat("y", i%40)+string(rune('a'+i%26)), "u", "1")
		if i%3 == 0 {
			e.Object = payload(3000)
		}
		_ = j.Writer().Update(func(tx *journal.Tx) error {
			if _, ok, _ := tx.Lookup(e.Key); ok {
				e.Type = journal.Modified
			}
			_, err := tx.Append(&e)
			return err
		})
	}
	_ = j.Close()
	orig, _ := os.ReadFile(src)
	rng := uint64(42)
	rand := func(n int) int {
		rng = rng*6364136223846793005 + 1442695040888963407
		return int((rng >> 33) % uint64(n))
	}
	damaged, reported := 0, 0
	for round := 0; round < 200; round++ {
		b := append([]byte(nil), orig...)
		for k := 0; k < 1+rand(4); k++ {
			off, n := rand(len(b)), 1+rand(64)
			for i := off; i < off+n && i < len(b); i++ {
				b[i] = byte(rand(256))
			}
		}
		path := filepath.Join(dir, "d.db")
		_ = os.WriteFile(path, b, 0o600)
		j, err := journal.Open(path, &journal.Options{ReadOnly: true, Timeout: -1})
		if err != nil {
			damaged++
			continue
		}
		r, verr := j.Check()
		if verr != nil || !r.OK() {
			reported++
		}
		_, _ = j.Read(1, 1000)
		_, _ = j.ScanIndex("", 1000)
		// The store's panics inside a callback's transaction stay
		// errors (only the callback's own go on: internal/storage).
		_, _ = j.Snapshot(func(journal.IndexEntry) error { return nil })
		_ = j.Close()
	}
	t.Logf("200 damaged copies: %d refused at Open, %d reported by Check", damaged, reported)
}
