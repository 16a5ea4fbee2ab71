package compactor_test

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/runtime/schema"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/watchjournal/watchjournal/journal"
	"github.com/watchjournal/watchjournal/journal/bolt"
	"github.com/watchjournal/watchjournal/journal/compactor"
)

var cm = journal.Resource{GVR: schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}, Namespace: "wj"}

func openJ(t *testing.T) (*journal.Journal, string) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "j.db")
	j, err := journal.Open(path, &journal.Options{Resource: &cm, NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = j.Close() })
	return j, path
}

// run starts c.Run in the background; stop cancels it and fails the test
// unless Run returned nil.
func run(t *testing.T, c *compactor.Compactor) (stop func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- c.Run(ctx) }()
	return func() {
		t.Helper()
		cancel()
		if err := <-done; err != nil {
			t.Fatal(err)
		}
	}
}

// eventually polls cond every millisecond for up to 10s; on timeout it
// fails with the message cond gave for the last state seen.
func eventually(t *testing.T, cond func() (ok bool, last string)) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		ok, last := cond()
		if ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatal(last)
		}
		time.Sleep(time.Millisecond)
	}
}

// write appends n events with payloads of size bytes, cycling over keys
// keys (ADDED first, MODIFIED after), in one transaction.
func write(t *testing.T, j *journal.Journal, n, keys, size int, at time.Time) {
	t.Helper()
	payload := []byte(`{"data":"` + strings.Repeat("x", size) + `"}`)
	err := j.Writer().Update(func(tx *journal.Tx) error {
		for i := 0; i < n; i++ {
			h, _ := tx.ResourceVersion(), 0
			key := fmt.Sprintf("wj/o%04d", i%keys)
			typ := journal.Added
			if _, ok, _ := tx.Lookup(key); ok {
				typ = journal.Modified
			}
			e := journal.Event{Type: typ, Key: key, UID: "u-" + key, ResourceVersion: h + "." + fmt.Sprint(i), Object: payload, Origin: journal.OriginWatch, Time: at}
			if _, err := tx.Append(&e); err != nil {
				return err
			}
		}
		return tx.SetResourceVersion(fmt.Sprint(n))
	})
	if err != nil {
		t.Fatal(err)
	}
}

func TestTrim_MaxEvents(t *testing.T) {
	j, _ := openJ(t)
	write(t, j, 2500, 100, 10, time.Now())
	res, err := compactor.New(j, compactor.Policy{MaxEvents: 1000}, compactor.Options{Step: 300}).Trim()
	if err != nil {
		t.Fatal(err)
	}
	st, _ := j.Stats()
	if res.Events != 1500 || st.FirstOffset != 1501 || st.LastOffset != 2500 {
		t.Fatalf("Trim(MaxEvents 1000) = %+v, stats %d..%d; want 1500 deleted, 1501..2500", res, st.FirstOffset, st.LastOffset)
	}
	if st.Objects != 100 {
		t.Errorf("index objects = %d; retention must not touch the index", st.Objects)
	}
}

func TestTrim_MaxBytesAndAge(t *testing.T) {
	j, _ := openJ(t)
	now := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	write(t, j, 100, 10, 1000, now.Add(-2*time.Hour))
	write(t, j, 100, 10, 1000, now)
	clk := clocktesting.NewFakeClock(now)
	if _, err := compactor.New(j, compactor.Policy{MaxAge: time.Hour}, compactor.Options{Clock: clk}).Trim(); err != nil {
		t.Fatal(err)
	}
	st, _ := j.Stats()
	if st.FirstOffset != 101 {
		t.Fatalf("after MaxAge 1h first offset = %d; want 101", st.FirstOffset)
	}
	limit := st.JournalBytes / 2
	if _, err := compactor.New(j, compactor.Policy{MaxBytes: limit}, compactor.Options{Step: 7}).Trim(); err != nil {
		t.Fatal(err)
	}
	st, _ = j.Stats()
	if st.JournalBytes > limit || st.JournalBytes < limit-1100 {
		t.Fatalf("after MaxBytes %d journal bytes = %d; want at most the limit, within one event", limit, st.JournalBytes)
	}
}

func TestTrim_ProtectsUncommittedConsumerUntilHardCap(t *testing.T) {
	j, _ := openJ(t)
	slow, _ := j.Consumers().Open("slow")
	write(t, j, 1000, 50, 100, time.Now())
	if evs, err := slow.TryNext(200); err != nil || len(evs) != 200 {
		t.Fatalf("TryNext(200) = %d events, %v", len(evs), err)
	}
	_ = slow.Commit(200)
	c := compactor.New(j, compactor.Policy{MaxEvents: 100}, compactor.Options{})
	if _, err := c.Trim(); err != nil {
		t.Fatal(err)
	}
	st, _ := j.Stats()
	if st.FirstOffset != 201 {
		t.Fatalf("first offset with a consumer committed at 200 = %d; want 201", st.FirstOffset)
	}
	// The hard cap wins: the slow consumer falls behind and is told so.
	hard := st.JournalBytes / 4
	c = compactor.New(j, compactor.Policy{MaxEvents: 100, HardMaxBytes: hard}, compactor.Options{})
	res, err := c.Trim()
	if err != nil || !res.Forced {
		t.Fatalf("Trim over the hard cap = %+v, %v; want Forced", res, err)
	}
	st, _ = j.Stats()
	if st.JournalBytes > hard {
		t.Fatalf("journal bytes %d above the hard cap %d", st.JournalBytes, hard)
	}
	_, err = slow.TryNext(10)
	var ce *journal.TrimmedError
	if !errors.As(err, &ce) || !errors.Is(err, journal.ErrTrimmed) || ce.Requested != 201 || ce.First != st.FirstOffset {
		t.Fatalf("TryNext behind retention = %v; want TrimmedError{201, %d}", err, st.FirstOffset)
	}

	// Resync: snapshot of the index at a head, then follow from head+1.
	state := map[string]string{}
	head, err := j.Snapshot(func(e journal.IndexEntry) error { state[e.Key] = e.ResourceVersion; return nil })
	if err != nil {
		t.Fatal(err)
	}
	slow.Seek(head + 1)
	write(t, j, 30, 60, 10, time.Now()) // keys 50..59 are new, 0..29 change
	for {
		evs, err := slow.TryNext(7)
		if err != nil {
			t.Fatal(err)
		}
		if len(evs) == 0 {
			break
		}
		for _, e := range evs {
			if e.Type == journal.Deleted {
				delete(state, e.Key)
			} else {
				state[e.Key] = e.ResourceVersion
			}
		}
	}
	want := map[string]string{}
	_, _ = j.Snapshot(func(e journal.IndexEntry) error { want[e.Key] = e.ResourceVersion; return nil })
	if fmt.Sprint(sorted(state)) != fmt.Sprint(sorted(want)) {
		t.Fatalf("state after snapshot and follow = %v; want the index %v", sorted(state), sorted(want))
	}
}

func sorted(m map[string]string) []string {
	var out []string
	for k, v := range m {
		out = append(out, k+"="+v)
	}
	sort.Strings(out)
	return out
}

// Retention holds its bound while the writer runs.
func TestRun_HoldsBoundWhileWriting(t *testing.T) {
	j, _ := openJ(t)
	stop := run(t, compactor.New(j, compactor.Policy{MaxEvents: 500}, compactor.Options{Step: 100}))
	for i := 0; i < 40; i++ {
		write(t, j, 100, 1000, 50, time.Now())
		// Wait for the compactor to bring the journal back under the bound
		// plus at most one batch in flight.
		eventually(t, func() (bool, string) {
			st, _ := j.Stats()
			n := st.LastOffset - st.FirstOffset + 1
			return n <= 600, fmt.Sprintf("journal holds %d events; bound 500 (+100 in flight)", n)
		})
	}
	stop()
}

// Ensure Run records its policy in the file, so that journalctl stats and
// the inspect socket (which read Settings.Retention) show the retention a
// running compactor applies, not "none".
func TestRun_RecordsPolicy(t *testing.T) {
	j, _ := openJ(t)
	if r, err := j.Settings().Retention(); err != nil || r != (journal.Retention{}) {
		t.Fatalf("Retention before Run = %+v, %v; want none", r, err)
	}
	p := compactor.Policy{MaxBytes: 64 << 20, MaxAge: time.Hour}
	stop := run(t, compactor.New(j, p, compactor.Options{}))
	eventually(t, func() (bool, string) {
		r, err := j.Settings().Retention()
		if err != nil {
			t.Fatal(err)
		}
		return r == p, fmt.Sprintf("Retention while Run runs = %+v; want %+v", r, p)
	})
	stop()
}

func TestCompactFile_GivesSpaceBack(t *testing.T) {
	j, path := openJ(t)
	write(t, j, 3000, 100, 1000, time.Now())
	if _, err := compactor.New(j, compactor.Policy{MaxEvents: 10}, compactor.Options{}).Trim(); err != nil {
		t.Fatal(err)
	}
	dst := path + ".compact"
	if _, _, err := compactor.CompactFile(path, dst); !errors.Is(err, journal.ErrLocked) {
		t.Fatalf("CompactFile while the writer holds the file = %v; want ErrLocked", err)
	}
	_ = j.Close()
	before, after, err := compactor.CompactFile(path, dst)
	if err != nil {
		t.Fatal(err)
	}
	if after >= before/2 {
		t.Fatalf("CompactFile: %d -> %d bytes; want at least half given back", before, after)
	}
	j2, err := journal.Open(dst, &journal.Options{ReadOnly: true})
	if err != nil {
		t.Fatalf("open compacted file: %v", err)
	}
	defer j2.Close()
	st, _ := j2.Stats()
	if st.FirstOffset != 2991 || st.LastOffset != 3000 || st.Objects != 100 {
		t.Fatalf("compacted file stats = %+v; want offsets 2991..3000 and 100 objects", st)
	}
	_ = os.Remove(dst)
}

// Ensure that the rewritten file records its freelist, as the store writes
// files: without it bbolt rebuilds the freelist at open in a goroutine
// where a corrupt page panics beyond any recover.
func TestCompactFile_FreelistSynced(t *testing.T) {
	j, path := openJ(t)
	write(t, j, 300, 10, 100, time.Now())
	_ = j.Close()
	dst := path + ".compact"
	if _, _, err := compactor.CompactFile(path, dst); err != nil {
		t.Fatal(err)
	}
	if !freelistSynced(t, dst) {
		t.Errorf("the rewritten file %s has no synced freelist (bbolt NoFreelistSync); want it synced", dst)
	}
	j2, err := journal.Open(dst, &journal.Options{NoSync: true})
	if err != nil {
		t.Fatalf("open the rewritten file: %v", err)
	}
	defer j2.Close()
	if st, _ := j2.Stats(); st.LastOffset != 300 {
		t.Errorf("rewritten file's last offset = %d; want 300", st.LastOffset)
	}
}

// freelistSynced reports whether the bbolt file at path records a freelist
// page in its current meta page. bbolt's layout: meta pages 0 and 1, each a
// 16-byte page header, then magic, version, page size and flags (4 bytes
// each), the root bucket (16 bytes), the freelist page id, the high-water
// page id and the txid (8 bytes each, little-endian on amd64/arm64); a
// file written with NoFreelistSync has freelist page id 0xffffffffffffffff.
// The meta with the larger txid is current.
func freelistSynced(t *testing.T, path string) bool {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	meta := func(off int) (freelist, txid uint64) {
		m := b[off+16:]
		return binary.LittleEndian.Uint64(m[32:]), binary.LittleEndian.Uint64(m[48:])
	}
	pageSize := int(binary.LittleEndian.Uint32(b[16+8:]))
	f0, tx0 := meta(0)
	f1, tx1 := meta(pageSize)
	if tx1 > tx0 {
		f0 = f1
	}
	return f0 != ^uint64(0)
}

// A slow consumer reads in short transactions while the writer appends and
// retention trims: the file stops growing once retention holds, because no
// long read transaction pins old pages.
func TestRetention_SlowReaderDoesNotGrowFile(t *testing.T) {
	j, _ := openJ(t)
	c := compactor.New(j, compactor.Policy{MaxEvents: 2000}, compactor.Options{Step: 500})
	slow, _ := j.Consumers().Open("slow")
	var warm int64
	for round := 0; round < 60; round++ {
		write(t, j, 200, 500, 500, time.Now())
		// The slow consumer reads a little and commits what it read.
		if evs, err := slow.TryNext(50); err != nil {
			var ce *journal.TrimmedError
			if !errors.As(err, &ce) {
				t.Fatal(err)
			}
			slow.Seek(ce.First)
		} else if len(evs) > 0 {
			_ = slow.Commit(evs[len(evs)-1].Offset)
		}
		// Keep the consumer from holding retention back forever: it is
		// slow, not stuck, so commit past the bound as it catches up.
		st, _ := j.Stats()
		if st.LastOffset > 2000 {
			if off, _ := slow.Committed(); off < st.LastOffset-2000 {
				_ = slow.Commit(st.LastOffset - 2000)
				slow.Seek(st.LastOffset - 1999)
			}
		}
		if _, err := c.Trim(); err != nil {
			t.Fatal(err)
		}
		st, _ = j.Stats()
		if round == 20 {
			warm = st.FileSize
		}
		if round > 20 && st.FileSize > warm*3/2 {
			t.Fatalf("round %d: file %d bytes, %d after warm-up: it keeps growing", round, st.FileSize, warm)
		}
	}
}

// A trim transaction is bounded in bytes as well as in events: a file
// that keeps objects copies each trimmed latest object inside the
// transaction, which bbolt holds on the heap until the commit, so a
// thousand events of 100 KiB would hold 100 MB. Trimming goes on, a
// transaction at a time, until the policy holds.
func TestTrim_StepBytesBoundsATransaction(t *testing.T) {
	j, _ := openJ(t)
	if err := j.Settings().KeepObjects(); err != nil {
		t.Fatal(err)
	}
	const n, size = 40, 100 << 10
	write(t, j, n, n, size, time.Now()) // 40 keys, each one event: every trimmed event is kept as its key's object

	del, bytes, err := j.Writer().Trim(n+1, 1000, 250<<10, 0)
	if err != nil {
		t.Fatal(err)
	}
	if del != 3 || bytes < 250<<10 {
		t.Fatalf("Trim(maxBytes 250 KiB) over events of %d bytes deleted %d (%d bytes); want 3, the third passing the bound", size, del, bytes)
	}

	res, err := compactor.New(j, compactor.Policy{MaxEvents: 1}, compactor.Options{StepBytes: 250 << 10}).Trim()
	if err != nil {
		t.Fatal(err)
	}
	st, _ := j.Stats()
	if res.Events != n-4 || st.FirstOffset != n || st.LastOffset != n {
		t.Fatalf("compactor Trim(MaxEvents 1, StepBytes 250 KiB) = %+v, stats %d..%d; want %d deleted in transactions of 3, %d..%d left", res, st.FirstOffset, st.LastOffset, n-4, n, n)
	}
	// Every key's object is still readable: the copies were kept.
	seen := 0
	if err := j.ViewObjects(func(v *journal.ObjectView) error {
		for i := range n {
			obj, ok, err := v.Get(fmt.Sprintf("wj/o%04d", i))
			if err != nil {
				return err
			}
			if ok && len(obj) > size {
				seen++
			}
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if seen != n {
		t.Fatalf("%d of %d objects readable after the trims", seen, n)
	}
}

// Rewrite holds the writer's lock through the copy and the rename: it
// fails with ErrLocked while a writer runs, in the moment a writer reopens
// its file too (its lock held, no bbolt handle open), and leaves the file
// as it was; once the lock is free it rewrites.
func TestRewrite_RefusedWhileAWriterHoldsTheLock(t *testing.T) {
	j, path := openJ(t)
	write(t, j, 50, 10, 100, time.Now())
	if _, _, err := compactor.Rewrite(path, nil); !errors.Is(err, journal.ErrLocked) {
		t.Fatalf("Rewrite while the writer runs = %v; want ErrLocked", err)
	}
	if err := j.Close(); err != nil {
		t.Fatal(err)
	}
	release, err := bolt.LockWriter(path, 0) // a writer between its close and its reopen
	if err != nil {
		t.Fatal(err)
	}
	before, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := compactor.Rewrite(path, nil); !errors.Is(err, journal.ErrLocked) {
		t.Fatalf("Rewrite while a writer holds its lock between reopens = %v; want ErrLocked", err)
	}
	after, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if string(before) != string(after) {
		t.Fatal("a refused Rewrite changed the file")
	}
	if _, err := os.Stat(path + ".compact"); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("a refused Rewrite left %s.compact: %v", path, err)
	}
	release()
	if _, _, err := compactor.Rewrite(path, nil); err != nil {
		t.Fatalf("Rewrite with the lock free = %v", err)
	}
	j2, err := journal.Open(path, &journal.Options{Resource: &cm, NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	defer j2.Close()
	if st, _ := j2.Stats(); st.LastOffset != 50 || st.Objects != 10 {
		t.Fatalf("after the rewrite: %d..%d, %d objects; want ..50, 10 objects", st.FirstOffset, st.LastOffset, st.Objects)
	}
}

// TrimRetained reads the consumers inside its write transaction: a
// consumer created or moved back after retention read Stats (the hold a
// joining handler lowers, a new consumer at 0) keeps its first uncommitted
// event, where Trim, the hard cap's, deletes past it.
func TestTrimRetained_ConsumersReadInTheTransaction(t *testing.T) {
	j, _ := openJ(t)
	write(t, j, 20, 20, 10, time.Now())
	if err := j.Consumers().Create("late", 6); err != nil { // reads next from 6: committed 5
		t.Fatal(err)
	}
	n, _, err := j.Writer().TrimRetained(21, 100, 0, 0) // chosen before the consumer existed
	if err != nil {
		t.Fatal(err)
	}
	st, _ := j.Stats()
	if n != 5 || st.FirstOffset != 6 {
		t.Fatalf("TrimRetained(21) with a consumer at 5 deleted %d, first offset %d; want 5 deleted, 6 first", n, st.FirstOffset)
	}
	if c, err := j.Consumers().Committed("late"); err != nil || c != 5 {
		t.Fatalf("consumer after the trim: %d, %v; want 5", c, err)
	}
	if n, _, err := j.Writer().Trim(21, 100, 0, 0); err != nil || n != 15 {
		t.Fatalf("Trim(21), the hard cap's, = %d, %v; want 15 deleted past the consumer", n, err)
	}
}
