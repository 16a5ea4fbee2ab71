package main

import (
	"strings"
	"testing"
	"time"

	"github.com/watchjournal/watchjournal/internal/testing/controlplane"
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

// watch's RESOURCE completes from the discovery of the apiserver that
// --kubeconfig names: list+watch resources by plural, .group outside core.
func TestCompletion_WatchResource(t *testing.T) {
	cp := controlplane.StartT(t, controlplane.Options{})
	stdout, stderr, code := runCLI("__complete", "watch", "--kubeconfig", cp.KubeconfigPath(), "")
	for _, want := range []string{"\nconfigmaps\n", "\nsecrets\n", "\ndeployments.apps\n", ":4\n"} {
		if code != 0 || !strings.Contains("\n"+stdout, want) {
			t.Errorf("__complete watch: exit %d, stdout %q, stderr %q; want 0 and %q", code, stdout, stderr, want)
		}
	}
	if strings.Contains(stdout, "bindings\n") || strings.Contains(stdout, "/") {
		t.Errorf("__complete watch: stdout %q has a resource without list+watch or a subresource", stdout)
	}
}

// With the apiserver unreachable the completion ends at once with nothing.
func TestCompletion_WatchResource_Unreachable(t *testing.T) {
	kc := writeKubeconfig(t, tempDir(t), "https://127.0.0.1:1")
	start := time.Now()
	stdout, _, code := runCLI("__complete", "watch", "--kubeconfig", kc, "")
	if took := time.Since(start); code != 0 || !strings.HasSuffix(stdout, "\n:4\n") || strings.Contains(stdout, "configmaps\n") || took > completionTimeout+time.Second {
		t.Errorf("__complete watch against a closed port: exit %d after %v, stdout %q; want 0 within %v, no resource and directive :4",
			code, took, stdout, completionTimeout+time.Second)
	}
}
