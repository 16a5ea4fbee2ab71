//go:build linux

package bolt

import (
	"bufio"
	"errors"
	"os"
	"strconv"
	"strings"
	"testing"

	"github.com/watchjournal/watchjournal/internal/storage"
)

// rssFile returns the process's RssFile (resident file-backed pages) in
// bytes, from /proc/self/status.
func rssFile(t *testing.T) int64 {
	t.Helper()
	f, err := os.Open("/proc/self/status")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "RssFile:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			if err != nil {
				t.Fatal(err)
			}
			return kb << 10
		}
	}
	t.Fatal("no RssFile in /proc/self/status")
	return 0
}

// TestStore_ReleaseMapped: reading every record of a 32 MiB journal makes
// the file's pages resident in the process (RssFile grows by about the
// file); ReleaseMapped gives at least half of them back, the records read
// the same afterwards, and a closed store returns ErrClosed.
func TestStore_ReleaseMapped(t *testing.T) {
	s, _ := openTemp(t, Options{NoSync: true})
	rec := make([]byte, 4000)
	for i := range rec {
		rec[i] = byte(i)
	}
	const n = 8192 // 32 MiB of records
	for b := 0; b < n; b += 1024 {
		if err := s.Update(func(tx storage.Tx) error {
			for range 1024 {
				if _, err := tx.Append(rec); err != nil {
					return err
				}
			}
			return nil
		}); err != nil {
			t.Fatal(err)
		}
	}
	read := func() {
		t.Helper()
		count := 0
		if err := s.View(func(tx storage.Tx) error {
			return tx.Records(1, func(_ uint64, r []byte) (bool, error) {
				if len(r) != len(rec) || r[len(r)-1] != rec[len(rec)-1] {
					return false, errors.New("a record reads differently")
				}
				count++
				return true, nil
			})
		}); err != nil {
			t.Fatal(err)
		}
		if count != n {
			t.Fatalf("read %d records, want %d", count, n)
		}
	}
	read()
	before := rssFile(t)
	covered, err := s.ReleaseMapped()
	if err != nil {
		t.Fatal(err)
	}
	after := rssFile(t)
	t.Logf("file %d MiB, map covered %d MiB; RssFile %d → %d MiB", s.Size()>>20, covered>>20, before>>20, after>>20)
	if covered < n*int64(len(rec)) {
		t.Errorf("covered %d bytes, less than the records' %d", covered, n*len(rec))
	}
	if before-after < n*int64(len(rec))/2 {
		t.Errorf("RssFile fell by %d bytes, want at least half the records' %d", before-after, n*len(rec))
	}
	read()
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := s.ReleaseMapped(); !errors.Is(err, storage.ErrClosed) {
		t.Errorf("ReleaseMapped on a closed store: %v, want ErrClosed", err)
	}
}
