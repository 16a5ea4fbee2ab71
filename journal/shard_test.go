package journal_test

import (
	"errors"
	"fmt"
	"path/filepath"
	"testing"

	"github.com/watchjournal/watchjournal/internal/hashrange"
	"github.com/watchjournal/watchjournal/journal"
)

const (
	lowHalf  = "shardRange(object.metadata.uid, '0x0000000000000000', '0x8000000000000000')"
	highHalf = "shardRange(object.metadata.uid, '0x8000000000000000', '0x10000000000000000')"
)

// Ensure that the shard range is part of the file's identity, compared in
// canonical form.
func TestOpen_ShardSelectorIsIdentity(t *testing.T) {
	path := filepath.Join(t.TempDir(), "j.db")
	res := cm
	res.ShardSelector = lowHalf
	j, err := journal.Open(path, &journal.Options{Resource: &res, NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	_ = j.Close()
	same := cm
	same.ShardSelector = "shardRange(object.metadata.uid, '0x0', '0x4000000000000000') || shardRange(object.metadata.uid,'0x4000000000000000','0x8000000000000000')"
	j, err = journal.Open(path, &journal.Options{Resource: &same, NoSync: true})
	if err != nil {
		t.Fatalf("Open with the same range spelled another way = %v; want nil", err)
	}
	_ = j.Close()
	for _, sel := range []string{highHalf, ""} {
		other := cm
		other.ShardSelector = sel
		if j, err := journal.Open(path, &journal.Options{Resource: &other, NoSync: true}); !errors.Is(err, journal.ErrResourceMismatch) {
			if err == nil {
				_ = j.Close()
			}
			t.Errorf("Open with shard selector %q = %v; want ErrResourceMismatch", sel, err)
		}
	}
}

// Ensure that Reshard journals the keys that leave as DELETED, keeps the
// others, records the new range and, when it grows, the pending part and
// no resourceVersion.
func TestWriter_Reshard(t *testing.T) {
	res := cm
	res.ShardSelector = lowHalf
	j, err := journal.Open(filepath.Join(t.TempDir(), "j.db"), &journal.Options{Resource: &res, NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	defer j.Close()
	low, _ := hashrange.Parse(lowHalf)
	quarter, _ := hashrange.Parse("shardRange(object.metadata.uid, '0x0000000000000000', '0x4000000000000000')")
	var keep, leave []string
	err = j.Writer().Update(func(tx *journal.Tx) error {
		for i := 0; len(keep) < 5 || len(leave) < 5; i++ {
			uid := fmt.Sprintf("uid-%d", i)
			if !low.ContainsUID(uid) {
				continue
			}
			key := fmt.Sprintf("ns/k%d", i)
			if quarter.ContainsUID(uid) {
				keep = append(keep, key)
			} else {
				leave = append(leave, key)
			}
			if _, err := tx.Append(&journal.Event{Type: journal.Added, Key: key, UID: uid, ResourceVersion: "5", Origin: journal.OriginWatch}); err != nil {
				return err
			}
		}
		return tx.SetResourceVersion("5")
	})
	if err != nil {
		t.Fatal(err)
	}
	// Shrink to the first quarter: the second quarter's keys leave.
	r, err := j.Writer().Reshard(quarter.Selector())
	if err != nil {
		t.Fatal(err)
	}
	if r.Left != len(leave) || r.Entered != "" {
		t.Fatalf("Reshard(quarter) = %+v; want %d left, nothing entered", r, len(leave))
	}
	evs, _ := j.Read(r.First, 100)
	for i, e := range evs {
		if e.Type != journal.Deleted || e.Key != leave[i] || e.Reason != journal.ReasonMoved || e.IsDeletion() {
			t.Errorf("event %d = %s %s reason %q; want DELETED %s reason moved", i, e.Type, e.Key, e.Reason, leave[i])
		}
	}
	for _, k := range keep {
		if _, ok, _ := j.Lookup(k); !ok {
			t.Errorf("%s left the index; its UID is in the range", k)
		}
	}
	if rv, _ := j.ResourceVersion(); rv != "5" {
		t.Errorf("resourceVersion after a shrink = %q; want 5 (kept)", rv)
	}
	// Grow to the high half as well: pending, no resourceVersion.
	grown := quarter.Union(hashrange.Set{{First: 1 << 63, Last: 1<<64 - 1}})
	if r, err = j.Writer().Reshard(grown.Selector()); err != nil {
		t.Fatal(err)
	}
	if r.Left != 0 || r.Entered != (hashrange.Set{{First: 1 << 63, Last: 1<<64 - 1}}).Selector() {
		t.Fatalf("Reshard(grown) = %+v; want nothing left, the high half entered", r)
	}
	if p, _ := j.Writer().ShardPending(); p != r.Entered {
		t.Errorf("ShardPending = %v; want %v", p, r.Entered)
	}
	if rv, _ := j.ResourceVersion(); rv != "" {
		t.Errorf("resourceVersion after a growth = %q; want none (the next loop lists)", rv)
	}
	if rec, _, _ := j.Resource(); rec.ShardSelector != grown.Selector() {
		t.Errorf("recorded shard selector = %q; want %q", rec.ShardSelector, grown.Selector())
	}
	if err := j.Writer().ClearShardPending(); err != nil {
		t.Fatal(err)
	}
	if p, _ := j.Writer().ShardPending(); p != "" {
		t.Errorf("ShardPending after ClearShardPending = %v; want none", p)
	}
}
