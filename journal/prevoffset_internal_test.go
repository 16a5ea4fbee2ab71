package journal

// Event.PrevOffset: every MODIFIED and DELETED records the offset of its
// key's previous event with an object, written in the transaction that
// appends it, whichever path appends it (Tx.Append, a relist's chunked
// commit); records written before it existed still decode, with 0.

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/vmihailenco/msgpack/v5"

	"github.com/watchjournal/watchjournal/internal/storage"
)

// prevOffsets reads the whole journal of j and returns, by "TYPE key@rv",
// each event's PrevOffset and its offset.
func prevOffsets(t *testing.T, j *Journal) (prev map[string]uint64, at map[string]uint64) {
	t.Helper()
	prev, at = map[string]uint64{}, map[string]uint64{}
	for _, e := range readAll(t, j) {
		k := fmt.Sprintf("%s %s@%s", e.Type, e.Key, e.ResourceVersion)
		prev[k], at[k] = e.PrevOffset, e.Offset
	}
	return prev, at
}

// On a real file: watch appends (one transaction and across two) and a
// relist committed in three chunks set PrevOffset on every MODIFIED and
// DELETED to the key's previous event with an object (0 when it had none,
// and for ADDEDs whatever the caller passed), and it reads back after a
// reopen.
func TestPrevOffset_WatchAppendsAndRelistCommit(t *testing.T) {
	path := filepath.Join(t.TempDir(), "j.db")
	j, err := Open(path, &Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	defer j.Close()
	obj := func(s string) []byte { return []byte(`{"v":"` + s + `"}`) }
	// Watch appends: a ADDED, MODIFIED twice (the second in the same
	// transaction as the first), b ADDED without an object then MODIFIED,
	// c ADDED then DELETED; a caller's PrevOffset is ignored.
	appendWatch(t, j, "",
		Event{Type: Added, Key: "ns/a", UID: "ua", ResourceVersion: "1", Object: obj("1"), PrevOffset: 99},
		Event{Type: Added, Key: "ns/b", UID: "ub", ResourceVersion: "2"},
		Event{Type: Added, Key: "ns/c", UID: "uc", ResourceVersion: "3", Object: obj("3")},
		Event{Type: Modified, Key: "ns/a", UID: "ua", ResourceVersion: "4", PrevResourceVersion: "1", Object: obj("4")})
	appendWatch(t, j, "7",
		Event{Type: Modified, Key: "ns/a", UID: "ua", ResourceVersion: "5", PrevResourceVersion: "4", Object: obj("5"), PrevOffset: 1},
		Event{Type: Modified, Key: "ns/b", UID: "ub", ResourceVersion: "6", PrevResourceVersion: "2", Object: obj("6")},
		Event{Type: Deleted, Key: "ns/c", UID: "uc", ResourceVersion: "7", Object: obj("3")})

	// A relist whose commit takes three chunks (commitChunk 250): 600 new
	// keys, then a changed and b gone.
	rel, err := j.Writer().BeginRelist()
	if err != nil {
		t.Fatal(err)
	}
	var evs []Event
	for i := range 2*commitChunk + 100 {
		evs = append(evs, Event{Type: Added, Key: fmt.Sprintf("ns/k%04d", i), UID: "u", ResourceVersion: "8", Origin: OriginRelist, Object: obj("8")})
	}
	evs = append(evs,
		Event{Type: Modified, Key: "ns/a", UID: "ua", ResourceVersion: "9", PrevResourceVersion: "5", Origin: OriginRelist, Object: obj("9"), PrevOffset: 2},
		Event{Type: Deleted, Key: "ns/b", UID: "ub", ResourceVersion: "6", Origin: OriginRelist, Reason: ReasonGone})
	if err := rel.Stage(evs); err != nil {
		t.Fatal(err)
	}
	if _, _, err := rel.Commit("10"); err != nil {
		t.Fatal(err)
	}
	j.Close()

	// Read back from the file, reopened.
	if j, err = Open(path, &Options{ReadOnly: true}); err != nil {
		t.Fatal(err)
	}
	prev, at := prevOffsets(t, j)
	want := map[string]uint64{
		"ADDED ns/a@1":     0,
		"ADDED ns/b@2":     0,
		"MODIFIED ns/a@4":  at["ADDED ns/a@1"], // in the same transaction as a@1
		"MODIFIED ns/a@5":  at["MODIFIED ns/a@4"],
		"MODIFIED ns/b@6":  0, // b's ADDED carried no object
		"DELETED ns/c@7":   at["ADDED ns/c@3"],
		"ADDED ns/k0599@8": 0,
		"MODIFIED ns/a@9":  at["MODIFIED ns/a@5"], // relist, last chunk
		"DELETED ns/b@6":   at["MODIFIED ns/b@6"],
	}
	for k, w := range want {
		if got, ok := prev[k]; !ok || got != w {
			t.Errorf("%s: PrevOffset %d (present %v), want %d; every event: %v", k, got, ok, w, prev)
		}
	}
	if at["MODIFIED ns/a@4"] == 0 || at["MODIFIED ns/a@5"] == 0 || at["MODIFIED ns/b@6"] == 0 {
		t.Fatalf("offsets %v: events missing", at)
	}
	if r, err := j.Check(); err != nil || !r.OK() || !r.Replayed {
		t.Fatalf("Check = %+v, %v; want a sound file, replayed", r, err)
	}
}

// Check finds a PrevOffset that is not the key's previous event with an
// object, and one at or past its own record.
func TestPrevOffset_CheckFindsAWrongOne(t *testing.T) {
	for name, c := range map[string]struct {
		prev uint64
		want string
	}{
		"another key's event": {1, "with PrevOffset 1, the key's previous event with an object is at 2"},
		"its own offset":      {3, "MODIFIED ns/b with PrevOffset 3"},
	} {
		t.Run(name, func(t *testing.T) {
			j, err := Open(filepath.Join(t.TempDir(), "j.db"), &Options{NoSync: true})
			if err != nil {
				t.Fatal(err)
			}
			defer j.Close()
			appendWatch(t, j, "",
				Event{Type: Added, Key: "ns/a", UID: "ua", ResourceVersion: "1", Object: []byte(`{}`)},
				Event{Type: Added, Key: "ns/b", UID: "ub", ResourceVersion: "2", Object: []byte(`{}`)})
			// Written past Tx.Append, which would set the right one.
			if err := j.store.Update(func(tx storage.Tx) error {
				e := Event{Type: Modified, Key: "ns/b", UID: "ub", ResourceVersion: "3", PrevResourceVersion: "2", Origin: OriginWatch,
					Object: []byte(`{}`), PrevOffset: c.prev}
				rec, err := encodeEvent(&e)
				if err != nil {
					return err
				}
				if e.Offset, err = tx.Append(rec); err != nil {
					return err
				}
				return applyIndex(tx, []byte(e.Key), &e)
			}); err != nil {
				t.Fatal(err)
			}
			r, err := j.Check()
			if err != nil || len(r.Problems) != 1 || !strings.Contains(r.Problems[0], c.want) {
				t.Fatalf("Check = %+v, %v; want one problem %q", r, err, c.want)
			}
		})
	}
}

// recordReason is the msgpack form of a version 2 record: record's fields,
// then the Reason as its string.
type recordReason struct {
	_msgpack struct{} `msgpack:",as_array"`
	record
	Reason string
}

// A record of version 1 or 2, written before PrevOffset existed, decodes
// with PrevOffset 0 and the rest as written.
func TestPrevOffset_OldRecordsDecode(t *testing.T) {
	r := record{Type: typeCodes[Modified], Key: "ns/a", UID: "ua", RV: "5", Time: 17, Origin: originCodes[OriginWatch],
		Object: []byte(`{}`), PrevRV: "4"}
	rr := recordReason{record: record{Type: typeCodes[Deleted], Key: "ns/a", UID: "ua", RV: "6", Time: 18, Origin: originCodes[OriginWatch],
		PrevRV: ""}, Reason: string(ReasonGone)}
	for v, body := range map[byte]any{recordVersion: &r, recordVersionReason: &rr} {
		b, err := msgpack.Marshal(body)
		if err != nil {
			t.Fatal(err)
		}
		e, err := decodeEvent(3, sealRecordVersion(v, b))
		if err != nil {
			t.Fatalf("version %d: %v", v, err)
		}
		if e.PrevOffset != 0 || e.Key != "ns/a" || e.UID != "ua" || (v == recordVersion && (e.Type != Modified || e.PrevResourceVersion != "4" || string(e.Object) != `{}`)) ||
			(v == recordVersionReason && (e.Type != Deleted || e.Reason != ReasonGone || e.Object != nil)) {
			t.Fatalf("version %d decodes to %+v", v, e)
		}
		key, obj, err := recordObject(3, sealRecordVersion(v, b))
		if err != nil || string(key) != "ns/a" || string(obj) != string(e.Object) {
			t.Fatalf("version %d: recordObject = %q, %q, %v", v, key, obj, err)
		}
	}
}
