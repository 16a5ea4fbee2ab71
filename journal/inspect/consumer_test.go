package inspect

import (
	"errors"
	"fmt"
	"path/filepath"
	"testing"

	"github.com/watchjournal/watchjournal/journal"
)

// consumersJournal returns a writable journal with events 1 to 4 and
// consumers billing at 2 and audit at 4.
func consumersJournal(t *testing.T) *journal.Journal {
	t.Helper()
	j, err := journal.Open(filepath.Join(t.TempDir(), "j.db"), &journal.Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { j.Close() })
	if err := j.Writer().Update(func(tx *journal.Tx) error {
		for i := 1; i <= 4; i++ {
			e := journal.Event{Type: journal.Added, Key: fmt.Sprintf("wj/%d", i), UID: fmt.Sprint("u", i),
				ResourceVersion: fmt.Sprint(i), Origin: journal.OriginWatch}
			if _, err := tx.Append(&e); err != nil {
				return err
			}
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	for name, off := range map[string]uint64{"billing": 2, "audit": 4} {
		c, err := j.Consumers().Open(name)
		if err != nil {
			t.Fatal(err)
		}
		if err := c.Commit(off); err != nil {
			t.Fatal(err)
		}
	}
	return j
}

// committed returns consumer name's committed offset in j, and false when
// there is no such consumer.
func committed(t *testing.T, j *journal.Journal, name string) (uint64, bool) {
	t.Helper()
	off, err := j.Consumers().Committed(name)
	if errors.Is(err, journal.ErrNoConsumer) {
		return 0, false
	}
	if err != nil {
		t.Fatal(err)
	}
	return off, true
}

// Ensure a consumer change checks the consumer again in its own
// transaction: a create finds a consumer registered meanwhile (after its
// first check, before its write) and refuses, leaving it where it was; a
// reset finds one deleted meanwhile gone and does not register it again.
// (Moved from journalctl's TestConsumers_Change_ConsumerChangedMeanwhile.)
func TestChangeConsumer_ConsumerChangedMeanwhile(t *testing.T) {
	for _, tc := range []struct {
		name      string
		change    ConsumerChange
		meanwhile func(*journal.Journal) error
		want      error
		committed int // afterwards; -1: none
	}{
		{"create finds one registered meanwhile", ConsumerChange{Op: "create", Name: "new", Offset: 4},
			func(j *journal.Journal) error { return j.Consumers().Create("new", 2) }, errConsumerExists, 1},
		{"reset finds one deleted meanwhile", ConsumerChange{Op: "reset", Name: "billing", Offset: 4},
			func(j *journal.Journal) error { return j.Consumers().Delete("billing") }, journal.ErrNoConsumer, -1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			j := consumersJournal(t)
			ran := false
			_, err := changeConsumer(j, tc.change, func(j *journal.Journal) {
				if err := tc.meanwhile(j); err != nil {
					t.Error(err)
				}
				ran = true
			})
			if !ran {
				t.Fatalf("ChangeConsumer = %v; the change never reached its transaction (the hook did not run)", err)
			}
			if !errors.Is(err, tc.want) {
				t.Errorf("ChangeConsumer = %v; want %v", err, tc.want)
			}
			off, ok := committed(t, j, tc.change.Name)
			if got := map[bool]int{true: int(off), false: -1}[ok]; got != tc.committed {
				t.Errorf("%s committed afterwards = %d; want %d (-1: none)", tc.change.Name, got, tc.committed)
			}
		})
	}
}

// Ensure a consumer deleted while a commit is under way (after the caller
// read the consumer's position, before the commit's transaction) is
// refused, no such consumer, and stays deleted: the check and the commit
// are one transaction. (Moved from journalctl's
// TestFileSource_Commit_ConsumerDeletedMeanwhile_NotRecreated.)
func TestCommitConsumer_ConsumerDeletedMeanwhile_NotRecreated(t *testing.T) {
	j := consumersJournal(t)
	ran := false
	err := commitConsumer(j, "billing", 3, func(j *journal.Journal) {
		if err := j.Consumers().Delete("billing"); err != nil {
			t.Error(err)
		}
		ran = true
	})
	if !ran {
		t.Fatalf("CommitConsumer = %v; the commit never reached its transaction (the hook did not run)", err)
	}
	if !errors.Is(err, journal.ErrNoConsumer) {
		t.Errorf("CommitConsumer of a consumer deleted meanwhile = %v; want ErrNoConsumer", err)
	}
	cs, err := j.Consumers().List()
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := findConsumer(cs, "billing"); ok {
		t.Errorf("consumers after the commit = %+v; want billing gone: the deleted consumer was registered again", cs)
	}
}
