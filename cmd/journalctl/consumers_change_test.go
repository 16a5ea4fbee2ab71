package main

import (
	"errors"
	"strings"
	"testing"

	"github.com/watchjournal/watchjournal/journal"
)

// fileCommitted returns consumer name's committed offset in the closed
// journal at path, and false when there is no such consumer.
func fileCommitted(t *testing.T, path, name string) (uint64, bool) {
	t.Helper()
	j, err := journal.Open(path, &journal.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer j.Close()
	off, err := j.Consumers().Committed(name)
	if errors.Is(err, journal.ErrNoConsumer) {
		return 0, false
	}
	if err != nil {
		t.Fatal(err)
	}
	return off, true
}

// consumerChangeCases run in order on the test journal (offsets 1 to 4,
// event 3 at 12:00:02.123) with billing at 2 and audit at 4. committed is
// the consumer's committed offset after the command, -1 for none.
var consumerChangeCases = []struct {
	name      string
	args      []string
	code      int
	out       string // in stdout (code 0) or stderr
	consumer  string
	committed int
}{
	{"create reads from the first retained", []string{"create", "ops"}, 0, "consumer ops created: committed 0, reads from 1, lag 4\n", "ops", 0},
	{"create --at-head", []string{"create", "tail", "--at-head"}, 0, "committed 4, reads from 5, lag 0", "tail", 4},
	{"create --from", []string{"create", "mid", "--from", "3"}, 0, "committed 2, reads from 3", "mid", 2},
	{"create an existing consumer", []string{"create", "audit"}, 1, `consumer exists: "audit"; consumers reset moves it`, "audit", 4},
	{"create --from past the head", []string{"create", "far", "--from", "9"}, 1, "offset 9 is past the head", "far", -1},
	{"create --at-head with --from", []string{"create", "x", "--at-head", "--from", "2"}, 1, "--at-head and --from exclude each other", "x", -1},
	{"reset --to-offset backwards", []string{"reset", "billing", "--to-offset", "1"}, 0, "consumer billing reset: committed 0, reads from 1, lag 4", "billing", 0},
	{"reset --to-time", []string{"reset", "billing", "--to-time", "2026-07-01T12:00:02Z"}, 0, "reads from 3", "billing", 2},
	{"reset --to-head", []string{"reset", "billing", "--to-head"}, 0, "reads from 5, lag 0", "billing", 4},
	{"reset --to-offset past the head", []string{"reset", "billing", "--to-offset", "9"}, 1, "offset 9 is past the head: the last event has offset 4", "billing", 4},
	{"reset --to-offset not a number", []string{"reset", "billing", "--to-offset", "x"}, 1, "want an offset: a whole number", "billing", 4},
	{"reset without a position", []string{"reset", "billing"}, 1, "give one of --to-offset, --to-time and --to-head", "billing", 4},
	{"reset a missing consumer", []string{"reset", "nobody", "--to-head"}, 1, `no such consumer: "nobody" (consumers create registers one)`, "nobody", -1},
	{"delete", []string{"delete", "billing"}, 0, "consumer billing deleted\n", "billing", -1},
	{"delete a missing consumer", []string{"delete", "billing"}, 1, "no such consumer", "billing", -1},
}

func TestConsumers_Change_File(t *testing.T) {
	path := writeConsumersJournal(t)
	for _, tc := range consumerChangeCases {
		args := append([]string{"consumers"}, tc.args...)
		stdout, stderr, code := runCLI(append(args, "--db", path)...)
		got := stdout
		if tc.code != 0 {
			got = stderr
		}
		if code != tc.code || !strings.Contains(got, tc.out) {
			t.Errorf("%s: journalctl %v: exit %d, stdout %q, stderr %q; want %d and %q", tc.name, args, code, stdout, stderr, tc.code, tc.out)
		}
		off, ok := fileCommitted(t, path, tc.consumer)
		if want := tc.committed; (want < 0) == ok || (ok && off != uint64(want)) {
			t.Errorf("%s: consumer %s committed %d (exists %t); want %d (-1: none)", tc.name, tc.consumer, off, ok, want)
		}
	}
}

// With a watch holding the file, the watch makes the change (its socket).
func TestConsumers_Change_Socket(t *testing.T) {
	j := servedConsumersJournal(t)
	for _, tc := range consumerChangeCases {
		args := append([]string{"consumers"}, tc.args...)
		stdout, stderr, code := runCLI(append(args, "--db", j.Path())...)
		got := stdout
		if tc.code != 0 {
			got = stderr
		}
		if code != tc.code || !strings.Contains(got, tc.out) {
			t.Errorf("%s: journalctl %v: exit %d, stdout %q, stderr %q; want %d and %q", tc.name, args, code, stdout, stderr, tc.code, tc.out)
		}
		off, err := j.Consumers().Committed(tc.consumer)
		ok := err == nil
		if want := tc.committed; (want < 0) == ok || (ok && off != uint64(want)) {
			t.Errorf("%s: consumer %s committed %d (exists %t); want %d (-1: none)", tc.name, tc.consumer, off, ok, want)
		}
	}
}
