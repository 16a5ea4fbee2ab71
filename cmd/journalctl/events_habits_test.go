package main

import (
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"

	"github.com/watchjournal/watchjournal/journal"
	"github.com/watchjournal/watchjournal/journal/inspect"
)

// tableOffsets returns the OFFSET column of a table, the header left out.
func tableOffsets(table string) string {
	lines := strings.Split(strings.TrimSuffix(table, "\n"), "\n")
	var offs []string
	for _, l := range lines[1:] {
		offs = append(offs, strings.Fields(l)[0])
	}
	return strings.Join(offs, ",")
}

// events' systemd journalctl habits on the test journal (offsets 1 to 4:
// ADDED wj/a, ADDED wj/b, MODIFIED wj/a, DELETED wj/b by a relist, one a
// second from t0 = 12:00:00.123).
func TestEvents_File_Filters(t *testing.T) {
	path := writeJournal(t)
	for _, tc := range []struct {
		name string
		args []string
		want string // the offsets printed, in order
	}{
		{"-n 2 prints the last two", []string{"-n", "2"}, "3,4"},
		{"--lines larger than the journal prints all", []string{"--lines", "10"}, "1,2,3,4"},
		{"-n counts the events the filters keep", []string{"-n", "1", "--type", "ADDED"}, "2"},
		{"-r prints the newest first", []string{"-r"}, "4,3,2,1"},
		{"-r -n 2 prints the last two, newest first", []string{"-r", "-n", "2"}, "4,3"},
		{"-n with --from stays at or after it", []string{"-n", "3", "--from", "3"}, "3,4"},
		{"--since a time", []string{"--since", "2026-07-01T12:00:02Z"}, "3,4"},
		{"--until a time", []string{"--until", "2026-07-01T12:00:01.5Z"}, "1,2"},
		{"--since and --until", []string{"--since", "2026-07-01T12:00:01Z", "--until", "2026-07-01T12:00:02.5Z"}, "2,3"},
		{"--since a duration ago that covers all", []string{"--since", "10000d"}, "1,2,3,4"},
		{"--since a duration ago after all", []string{"--since", "1h"}, ""},
		{"-r --since", []string{"-r", "--since", "2026-07-01T12:00:02Z"}, "4,3"},
		{"--key", []string{"--key", "wj/a"}, "1,3"},
		{"--namespace", []string{"--namespace", "wj"}, "1,2,3,4"},
		{"--namespace of no event", []string{"--namespace", "w"}, ""},
		{"--type, any case", []string{"--type", "deleted"}, "4"},
		{"--origin", []string{"--origin", "relist"}, "4"},
		{"--origin watch --key wj/b", []string{"--origin", "watch", "--key", "wj/b"}, "2"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			stdout, stderr, code := runCLI(append([]string{"events", "--db", path}, tc.args...)...)
			if got := tableOffsets(stdout); code != 0 || got != tc.want {
				t.Errorf("events %v: exit %d, offsets %q, stdout\n%s\nstderr %q; want 0 and offsets %q", tc.args, code, got, stdout, stderr, tc.want)
			}
		})
	}
}

// events' kubectl output formats.
func TestEvents_File_Formats(t *testing.T) {
	path := writeJournal(t)
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"-o name prints the keys", []string{"-o", "name"}, "wj/a\nwj/b\nwj/a\nwj/b\n"},
		{"-o wide adds the previous resourceVersion, synthesized and reason", []string{"-o", "wide", "--from", "3"},
			`OFFSET  TIME                      TYPE      ORIGIN  KEY   UID  RESOURCEVERSION  PREVRESOURCEVERSION  SYNTHESIZED  REASON
3       2026-07-01T12:00:02.123Z  MODIFIED  watch   wj/a  u1   12               10                   false        -
4       2026-07-01T12:00:03.123Z  DELETED   relist  wj/b  u2   11               -                    true         -
`},
		{"-o yaml is one sequence", []string{"-o", "yaml", "--from", "4"}, `- key: wj/b
  object: null
  offset: 4
  origin: relist
  resourceVersion: "11"
  synthesized: true
  time: "2026-07-01T12:00:03.123Z"
  type: DELETED
  uid: u2
`},
		{"-o yaml of nothing is an empty sequence", []string{"-o", "yaml", "--key", "none"}, "[]\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			stdout, stderr, code := runCLI(append([]string{"events", "--db", path}, tc.args...)...)
			if code != 0 || stdout != tc.want {
				t.Errorf("events %v: exit %d, stdout\n%s\nstderr %q; want 0 and\n%s", tc.args, code, stdout, stderr, tc.want)
			}
		})
	}
}

// -o json and yaml leave metadata.managedFields out unless
// --show-managed-fields, as kubectl get does.
func TestEvents_File_ManagedFields(t *testing.T) {
	path := filepath.Join(tempDir(t), "j.db")
	j := openJournal(t, path)
	e := ev(journal.Added, "wj/a", "u1", "10", 0)
	e.Object = []byte(`{"metadata":{"name":"a","managedFields":[{"manager":"kubectl"}]},"data":{"k":"v"}}`)
	appendEvents(t, j, "10", e)
	j.Close()
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"-o", "json"}, `{"data":{"k":"v"},"metadata":{"name":"a"}}`},
		{[]string{"-o", "json", "--show-managed-fields"}, `{"metadata":{"name":"a","managedFields":[{"manager":"kubectl"}]},"data":{"k":"v"}}`},
	} {
		stdout, stderr, code := runCLI(append([]string{"events", "--db", path}, tc.args...)...)
		var evs []inspect.Event
		if err := json.Unmarshal([]byte(stdout), &evs); err != nil || code != 0 || len(evs) != 1 {
			t.Fatalf("events %v: exit %d, stdout %q, stderr %q: %v; want one JSON array of one event", tc.args, code, stdout, stderr, err)
		}
		if got := string(evs[0].Object); got != tc.want {
			t.Errorf("events %v: object %s; want %s", tc.args, got, tc.want)
		}
	}
	stdout, _, _ := runCLI("events", "--db", path, "-o", "yaml")
	if strings.Contains(stdout, "managedFields") || !strings.Contains(stdout, "name: a") {
		t.Errorf("events -o yaml:\n%s\nwant the object without managedFields", stdout)
	}
}

// The reason of a DELETED (journal.Reason) is the REASON column of -o wide
// and "reason" in -o json; an event without one has "-" and no "reason".
func TestEvents_File_Reason(t *testing.T) {
	path := filepath.Join(tempDir(t), "j.db")
	j := openJournal(t, path)
	left := ev(journal.Deleted, "wj/a", "u1", "11", 1)
	left.Reason = journal.ReasonLeftSelector
	moved := ev(journal.Added, "wj/a", "u1", "12", 2)
	moved.Reason = journal.ReasonMoved
	gone := ev(journal.Deleted, "wj/a", "u1", "13", 3)
	gone.Reason, gone.Origin, gone.Object = journal.ReasonGone, journal.OriginRelist, nil
	appendEvents(t, j, "13", ev(journal.Added, "wj/a", "u1", "10", 0), left, moved, gone)
	j.Close()

	stdout, stderr, code := runCLI("events", "--db", path, "-o", "wide")
	want := `OFFSET  TIME                      TYPE     ORIGIN  KEY   UID  RESOURCEVERSION  PREVRESOURCEVERSION  SYNTHESIZED  REASON
1       2026-07-01T12:00:00.123Z  ADDED    watch   wj/a  u1   10               -                    false        -
2       2026-07-01T12:00:01.123Z  DELETED  watch   wj/a  u1   11               -                    false        left-selector
3       2026-07-01T12:00:02.123Z  ADDED    watch   wj/a  u1   12               -                    false        moved
4       2026-07-01T12:00:03.123Z  DELETED  relist  wj/a  u1   13               -                    true         gone
`
	if code != 0 || stdout != want {
		t.Errorf("events -o wide: exit %d, stdout\n%s\nstderr %q; want 0 and\n%s", code, stdout, stderr, want)
	}

	stdout, stderr, code = runCLI("events", "--db", path, "-o", "json")
	var got []map[string]any
	if err := json.Unmarshal([]byte(stdout), &got); code != 0 || err != nil || len(got) != 4 {
		t.Fatalf("events -o json: exit %d, %v, stdout\n%s\nstderr %q", code, err, stdout, stderr)
	}
	for i, want := range []any{nil, "left-selector", "moved", "gone"} {
		if got[i]["reason"] != want {
			t.Errorf("offset %d: reason %v, want %v", i+1, got[i]["reason"], want)
		}
	}
	if _, ok := got[0]["reason"]; ok {
		t.Errorf("offset 1 (no reason) has a reason field: %v", got[0])
	}

	// --reason keeps the events of one reason; none those without.
	for _, tc := range []struct{ reason, want string }{{"left-selector", "2"}, {"MOVED", "3"}, {"gone", "4"}, {"none", "1"}, {"unconfirmed", ""}} {
		stdout, stderr, code := runCLI("events", "--db", path, "--reason", tc.reason)
		if got := tableOffsets(stdout); code != 0 || got != tc.want {
			t.Errorf("events --reason %s: exit %d, offsets %q, stderr %q; want 0 and %q", tc.reason, code, got, stderr, tc.want)
		}
	}
	if _, stderr, code := runCLI("events", "--db", path, "--reason", "vanished"); code == 0 || !strings.Contains(stderr, `--reason "vanished": want gone, left-selector, moved, unconfirmed, none`) {
		t.Errorf("events --reason vanished: exit %d, stderr %q; want an error naming the values", code, stderr)
	}
}
