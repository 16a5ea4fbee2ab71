package journal_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/watchjournal/watchjournal/journal"
)

// A writer and three consumers run at once in one process; consumers
// commit at random and are rebuilt at random in memory (the Consumer value
// is dropped and a new one reads its position from the same open journal:
// no process dies, the file is not reopened; see reconcile's
// TestLoop_RestartAfterKill for real SIGKILLs). Per consumer, no event is
// lost or skipped, and an event is seen twice only if it was read and not
// committed before its rebuild.
func TestConsumer_ConcurrentWithInMemoryRebuilds_AtLeastOnce(t *testing.T) {
	j := open(t, filepath.Join(t.TempDir(), "j.db"))
	const total = 3000
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()

	var wg sync.WaitGroup
	wg.Add(1)
	go func() { // the writer, group-committing batches of 1..50
		defer wg.Done()
		for n := 0; n < total; {
			k := min(1+rand.IntN(50), total-n)
			err := j.Writer().Update(func(tx *journal.Tx) error {
				for i := 0; i < k; i++ {
					e := journal.Event{Type: journal.Added, Key: fmt.Sprintf("wj/o%05d", n+i), UID: "u", ResourceVersion: fmt.Sprint(n + i + 1), Origin: journal.OriginWatch}
					if _, err := tx.Append(&e); err != nil {
						return err
					}
				}
				return tx.SetResourceVersion(fmt.Sprint(n + k))
			})
			if err != nil {
				t.Errorf("writer: %v", err)
				return
			}
			n += k
		}
	}()

	for ci := 0; ci < 3; ci++ {
		wg.Add(1)
		go func(name string) {
			defer wg.Done()
			seen := map[uint64]int{}
			var allowedDup map[uint64]bool = map[uint64]bool{}
			c, err := j.Consumers().Open(name)
			if err != nil {
				t.Error(err)
				return
			}
			var readNotCommitted []uint64
			crashes := 0
			for {
				evs, err := c.Next(ctx, 1+rand.IntN(100))
				if err != nil {
					t.Errorf("%s: Next = %v", name, err)
					return
				}
				for _, e := range evs {
					if seen[e.Offset] > 0 && !allowedDup[e.Offset] {
						t.Errorf("%s: offset %d seen again though it was committed", name, e.Offset)
					}
					seen[e.Offset]++
					readNotCommitted = append(readNotCommitted, e.Offset)
				}
				last := evs[len(evs)-1].Offset
				switch r := rand.IntN(10); {
				case r < 5:
					if err := c.Commit(last); err != nil {
						t.Error(err)
						return
					}
					readNotCommitted = nil
				case r == 9 && crashes < 20:
					// Crash: what was read but not committed may come again.
					crashes++
					for _, off := range readNotCommitted {
						allowedDup[off] = true
					}
					readNotCommitted = nil
					if c, err = j.Consumers().Open(name); err != nil {
						t.Error(err)
						return
					}
				}
				if last == total {
					break
				}
			}
			for off := uint64(1); off <= total; off++ {
				if seen[off] == 0 {
					t.Errorf("%s: offset %d never read", name, off)
					return
				}
			}
		}(fmt.Sprintf("c%d", ci))
	}
	wg.Wait()
}

func TestConsumer_CommitIsDurable(t *testing.T) {
	path := filepath.Join(t.TempDir(), "j.db")
	j, err := journal.Open(path, &journal.Options{Resource: &cm})
	if err != nil {
		t.Fatal(err)
	}
	appendEvents(t, j, "3", ev(journal.Added, "wj/a", "u", "1"), ev(journal.Added, "wj/b", "u", "2"), ev(journal.Added, "wj/c", "u", "3"))
	c, _ := j.Consumers().Open("app")
	evs, _ := c.TryNext(2)
	_ = c.Commit(evs[1].Offset)
	_ = j.Close()

	j = open(t, path)
	c, _ = j.Consumers().Open("app")
	evs, err = c.TryNext(10)
	if err != nil || len(evs) != 1 || evs[0].Offset != 3 {
		t.Fatalf("after reopen TryNext = %+v, %v; want offset 3 only", evs, err)
	}
	infos, _ := j.Consumers().List()
	if len(infos) != 1 || infos[0].Committed != 2 || infos[0].Lag != 1 {
		t.Errorf("Consumers() = %+v; want app committed 2 lag 1", infos)
	}
}

func TestConsumer_Next_BlocksUntilAppendAndHonoursContext(t *testing.T) {
	j := open(t, filepath.Join(t.TempDir(), "j.db"))
	c, _ := j.Consumers().Open("app")
	short, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	if _, err := c.Next(short, 10); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Next on an empty journal = %v; want DeadlineExceeded", err)
	}
	got := make(chan []journal.Event, 1)
	go func() {
		evs, _ := c.Next(context.Background(), 10)
		got <- evs
	}()
	appendEvents(t, j, "1", ev(journal.Added, "wj/a", "u", "1"))
	if evs := <-got; len(evs) != 1 || evs[0].Key != "wj/a" {
		t.Fatalf("Next = %+v; want the appended event", evs)
	}
}

func TestConsumer_SeekTime(t *testing.T) {
	j := open(t, filepath.Join(t.TempDir(), "j.db"))
	base := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	for i := 0; i < 10; i++ {
		e := ev(journal.Added, fmt.Sprintf("wj/%d", i), "u", fmt.Sprint(i))
		e.Time = base.Add(time.Duration(i) * time.Minute)
		appendEvents(t, j, fmt.Sprint(i), e)
	}
	c, _ := j.Consumers().Open("app")
	if err := c.SeekTime(base.Add(4*time.Minute + time.Second)); err != nil {
		t.Fatal(err)
	}
	evs, _ := c.TryNext(1)
	if len(evs) != 1 || evs[0].Offset != 6 {
		t.Fatalf("after SeekTime(4m1s) TryNext = %+v; want offset 6", evs)
	}
}

// Ensure Consumers.Create registers a new name at the position asked (0: the
// first retained event) and refuses, moving nothing, a name already
// registered (ErrConsumerExists), a position past the head + 1
// (ErrOffsetRange), one retention trimmed (ErrTrimmed) and a bad name.
func TestJournal_CreateConsumer(t *testing.T) {
	j := open(t, filepath.Join(t.TempDir(), "j.db"))
	appendEvents(t, j, "4", ev(journal.Added, "wj/a", "u", "1"), ev(journal.Added, "wj/b", "u", "2"),
		ev(journal.Added, "wj/c", "u", "3"), ev(journal.Added, "wj/d", "u", "4"))
	if _, _, err := j.Writer().Trim(2, 10, 0, 0); err != nil { // offsets 2 to 4 retained
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		next uint64
		want error
		// committed is the consumer's committed offset afterwards.
		committed uint64
	}{
		{"first", 0, nil, 1},
		{"third", 3, nil, 2},
		{"tail", 5, nil, 4},
		{"third", 4, journal.ErrConsumerExists, 2},
		{"far", 6, journal.ErrOffsetRange, 0},
		{"trimmed", 1, journal.ErrTrimmed, 0},
		{"", 0, journal.ErrBadKey, 0},
	} {
		err := j.Consumers().Create(tc.name, tc.next)
		if !errors.Is(err, tc.want) || (tc.want == nil) != (err == nil) {
			t.Errorf("Consumers.Create(%q, %d) = %v; want %v", tc.name, tc.next, err, tc.want)
		}
		got, err := j.Consumers().Committed(tc.name)
		switch {
		case tc.committed == 0 && !errors.Is(err, journal.ErrNoConsumer):
			t.Errorf("after Consumers.Create(%q, %d): committed %d, %v; want no such consumer", tc.name, tc.next, got, err)
		case tc.committed > 0 && got != tc.committed:
			t.Errorf("after Consumers.Create(%q, %d): committed %d, %v; want %d", tc.name, tc.next, got, err, tc.committed)
		}
	}
}
