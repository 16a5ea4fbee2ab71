package journal

import (
	"encoding/binary"
	"errors"
	"os"
	"runtime"
	"testing"

	"github.com/watchjournal/watchjournal/internal/storage"
)

// Ensure that a corrupt record length in the stage file is refused before
// anything is allocated for it (it is bounded by what the file holds after
// it), with a *stageRecordError, and that Open then recovers as for a lost
// stage file: the resourceVersion is cleared so that the next run relists.
func TestStage_CorruptLengthIsBoundedByTheFile(t *testing.T) {
	path, j, rel := stagedRelist(t, 3*commitChunk)
	if _, err := rel.mark("7"); err != nil {
		t.Fatal(err)
	}
	if err := j.finishRelistChunks(1); err != nil {
		t.Fatal(err)
	}
	var nonce uint64
	var size, pos int64
	if err := j.store.View(func(tx storage.Tx) error {
		var ok bool
		if nonce, size, pos, ok = decodeStageMeta(tx.Meta(metaRelistStage)); !ok {
			t.Fatal("no stage marker after the first chunk")
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	_ = j.Close()

	// The next record's length becomes 4 GiB - 1.
	f, err := os.OpenFile(stagePath(path), os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteAt([]byte{0xff, 0xff, 0xff, 0xff}, pos); err != nil {
		t.Fatal(err)
	}
	_ = f.Close()

	sr, err := openStage(stagePath(path), nonce, size, pos)
	if err != nil {
		t.Fatal(err)
	}
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	_, _, err = sr.next()
	runtime.ReadMemStats(&after)
	sr.close()
	var rerr *stageRecordError
	if !errors.As(err, &rerr) || !errors.Is(err, errStageLost) || rerr.Length != 1<<32-1 || rerr.Left != size-pos-4 {
		t.Fatalf("next() on a record claiming 4 GiB = %v; want a *stageRecordError (length 4294967295, %d left) matching errStageLost", err, size-pos-4)
	}
	if got := after.TotalAlloc - before.TotalAlloc; got > 1<<20 {
		t.Fatalf("next() on a record claiming 4 GiB allocated %d bytes; want it refused before allocating", got)
	}

	_, st := reopen(t, path)
	if st.ResourceVersion != "" || st.LastOffset < commitChunk+1 {
		t.Fatalf("Stats() after reopen = %+v; want the first chunk kept and the resourceVersion cleared (relist)", st)
	}
}

// Ensure that a record length within the file but past the marker's size
// is refused as well: the marker's size, not the file's, bounds it.
func TestStage_LengthPastTheMarkersSize(t *testing.T) {
	dir := t.TempDir()
	p := dir + "/s.relist"
	w, err := createStage(p)
	if err != nil {
		t.Fatal(err)
	}
	if err := w.add([]byte("0123456789")); err != nil {
		t.Fatal(err)
	}
	if err := w.finish(true); err != nil {
		t.Fatal(err)
	}
	size := w.size
	_ = w.f.Close()
	// Bytes after the marker's size (a later, unfinished write).
	f, _ := os.OpenFile(p, os.O_RDWR|os.O_APPEND, 0)
	_, _ = f.Write(make([]byte, 100))
	_ = f.Close()
	b, _ := os.ReadFile(p)
	binary.BigEndian.PutUint32(b[stageHeader:], 50) // within the file, past size
	_ = os.WriteFile(p, b, 0o600)

	sr, err := openStage(p, w.nonce, size, stageHeader)
	if err != nil {
		t.Fatal(err)
	}
	defer sr.close()
	var rerr *stageRecordError
	if _, _, err := sr.next(); !errors.As(err, &rerr) {
		t.Fatalf("next() on a record past the marker's size = %v; want a *stageRecordError", err)
	}
}
