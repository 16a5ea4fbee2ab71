package journal

import (
	"fmt"

	"github.com/watchjournal/watchjournal/internal/storage"
)

// CheckReport is what Check found.
type CheckReport struct {
	// Events and Objects are how many journal records and index entries
	// were read.
	Events, Objects uint64
	// Replayed is true when the journal still starts at offset 1, so its
	// replay could be compared with the index.
	Replayed bool
	// Problems lists what is wrong, one line each; empty when the file is
	// sound. At most 100 are kept; Truncated is set when there were more.
	Problems  []string
	Truncated bool
}

// OK reports whether Check found no problem.
func (r CheckReport) OK() bool { return len(r.Problems) == 0 }

// Check checks the whole file offline, in one read transaction: every page it
// reaches is readable; every record decodes; offsets are contiguous; the stored
// payload size and object count match; every index entry decodes; and, when
// nothing has been trimmed, that replaying the journal per key is consistent
// (no ADDED for a present key, no MODIFIED or DELETED for an absent one or
// another UID, a PrevOffset that is the key's previous event with an
// object) and ends in exactly the index. A PrevOffset at or past its own
// record's offset is a problem whether or not the journal was trimmed. It reads everything: run it
// offline or rarely. The error is for a file it cannot read at all. It is
// the offline file check (secondary indexes included: entries of live keys,
// value and key entries agreeing); the anti-entropy relist against the server is
// reconcile.Loop.Verify.
func (j *Journal) Check() (CheckReport, error) {
	var r CheckReport
	problem := func(format string, args ...any) {
		if len(r.Problems) < 100 {
			r.Problems = append(r.Problems, fmt.Sprintf(format, args...))
		} else {
			r.Truncated = true
		}
	}
	err := j.store.View(func(tx storage.Tx) error {
		// bbolt's own tx.Check walks pages in a goroutine of its own, where
		// a damaged page faults beyond recovery; this walk stays in ours.
		first, last, next := tx.FirstOffset(), tx.LastOffset(), tx.NextOffset()
		if last >= next {
			problem("journal: last offset %d but next offset %d", last, next)
		}
		type obj struct {
			uid, rv string
			object  uint64 // offset of the key's last event if it had an object, else 0
		}
		replay := map[string]obj{}
		r.Replayed = first == 1
		want, size := first, uint64(0)
		err := tx.Records(first, func(off uint64, rec []byte) (bool, error) {
			r.Events++
			size += uint64(len(rec))
			if off != want {
				problem("journal: offset %d follows %d", off, want-1)
				r.Replayed = false
			}
			want = off + 1
			e, err := decodeEvent(off, rec)
			if err != nil {
				problem("%v", err)
				r.Replayed = false
				return true, nil
			}
			if e.PrevOffset >= off {
				problem("offset %d: %s %s with PrevOffset %d", off, e.Type, e.Key, e.PrevOffset)
			}
			if !r.Replayed {
				return true, nil
			}
			cur, present := replay[e.Key]
			switch {
			case e.Type == Added && present:
				problem("offset %d: ADDED %s while present", off, e.Key)
			case e.Type != Added && !present:
				problem("offset %d: %s %s while absent", off, e.Type, e.Key)
			case e.Type != Added && cur.uid != e.UID:
				problem("offset %d: %s %s with uid %s, present uid %s", off, e.Type, e.Key, e.UID, cur.uid)
			case e.PrevOffset != 0 && e.PrevOffset < off && e.PrevOffset != cur.object:
				problem("offset %d: %s %s with PrevOffset %d, the key's previous event with an object is at %d", off, e.Type, e.Key, e.PrevOffset, cur.object)
			}
			if e.Type == Deleted {
				delete(replay, e.Key)
			} else {
				o := obj{uid: e.UID, rv: e.ResourceVersion}
				if len(e.Object) > 0 {
					o.object = off
				}
				replay[e.Key] = o
			}
			return true, nil
		})
		if err != nil {
			return err
		}
		if size != tx.JournalBytes() {
			problem("journal: records hold %d bytes, meta says %d", size, tx.JournalBytes())
		}
		err = tx.IndexScan(nil, func(k, v []byte) (bool, error) {
			r.Objects++
			e, err := decodeIndex(k, v)
			if err != nil {
				problem("%v", err)
				return true, nil
			}
			if r.Replayed {
				if o, ok := replay[e.Key]; !ok || o.uid != e.UID || o.rv != e.ResourceVersion {
					problem("index %s (uid %s, rv %s) differs from the journal's replay (%+v, present %v)", e.Key, e.UID, e.ResourceVersion, o, ok)
				}
				delete(replay, e.Key)
			}
			return true, nil
		})
		if err != nil {
			return err
		}
		if r.Replayed {
			for k := range replay {
				problem("journal replay holds %s, the index does not", k)
			}
		}
		if r.Objects != tx.IndexCount() {
			problem("index: %d entries, meta count %d", r.Objects, tx.IndexCount())
		}
		if tx.Meta(metaRelistRV) != nil {
			problem("a relist commit was interrupted; the next writable Open finishes it")
		}
		if err := checkObjects(tx, problem); err != nil {
			return err
		}
		return checkIndexes(tx, problem)
	})
	return r, err
}
