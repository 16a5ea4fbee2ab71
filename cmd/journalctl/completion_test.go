package main

import (
	"strings"
	"testing"
)

// Shell completion: cobra's completion command, and its __complete
// answers for commands, flags and consumer names read from the file.
func TestCompletion(t *testing.T) {
	path := writeConsumersJournal(t)
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"commands", []string{"__complete", "con"}, "consumers\t"},
		{"flags", []string{"__complete", "events", "--rev"}, "--reverse\t"},
		{"consumer names for consumers reset", []string{"__complete", "consumers", "reset", "--db", path, ""}, "audit\nbilling\n:4\n"},
		{"consumer names for consumers delete", []string{"__complete", "consumers", "delete", "--db", path, "b"}, "audit\nbilling\n:4\n"},
		{"consumer names for events --consumer", []string{"__complete", "events", "--db", path, "--consumer", ""}, "audit\nbilling\n:4\n"},
		{"a bash script", []string{"completion", "bash"}, "# bash completion V2 for journalctl"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			stdout, stderr, code := runCLI(tc.args...)
			if code != 0 || !strings.Contains(stdout, tc.want) {
				t.Errorf("journalctl %v: exit %d, stdout %q, stderr %q; want 0 and %q", tc.args, code, stdout, stderr, tc.want)
			}
		})
	}
}
