package main

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// Ensure that watch restarts on its file with a label selector spelled
// another way that selects the same objects, and still refuses one that
// selects other objects (exit 2).
func TestWatch_EquivalentSelectorRestarts(t *testing.T) {
	_, kubeconfig, db := watchFiles(t, fakeAPIServer(t))
	for _, sel := range []string{"app=x,tier=web", "tier=web,app=x", " app = x , tier = web ", "app==x,tier==web", "app in (x),tier=web"} {
		ctx, cancel := context.WithCancel(context.Background())
		_, stderr, code := startCLI(ctx, "watch", "cm", "--db", db, "--kubeconfig", kubeconfig, "-l", sel)
		stderr.waitFor(t, "watching")
		cancel()
		if c := exitStatus(t, code); c != 0 {
			t.Errorf("watch -l %q on a file recorded with -l app=x,tier=web: exit %d; want 0; stderr:\n%s", sel, c, stderr)
		}
	}
	_, errOut, c := runCLI("watch", "cm", "--db", db, "--kubeconfig", kubeconfig, "-l", "app=y,tier=web")
	if c != 2 || !strings.Contains(errOut, "file records another resource") {
		t.Errorf("watch -l app=y,tier=web on a file recorded with -l app=x,tier=web: exit %d, stderr %q; want 2 and the mismatch", c, errOut)
	}
}

// Ensure that watch refuses a selector that does not parse, a label key
// past the API's bounds among them, with a short message and before the
// file exists (exit 1).
func TestWatch_InvalidSelectorIsRefusedBeforeTheFile(t *testing.T) {
	dir := tempDir(t)
	db := filepath.Join(dir, "cm.db")
	for _, args := range [][]string{
		{"-l", strings.Repeat("k", 40000) + "=x"},
		{"-l", "app in (x"},
		{"--field-selector", "metadata.name"},
	} {
		_, errOut, c := runCLI(append([]string{"watch", "cm", "--db", db, "--kubeconfig", filepath.Join(dir, "none")}, args...)...)
		if c != 1 || len(errOut) > 1000 || !strings.Contains(errOut, args[0]) {
			t.Errorf("watch %s %.40q: exit %d, stderr %.300q; want 1 and a short message naming the flag", args[0], args[1], c, errOut)
		}
		if _, err := os.Stat(db); !os.IsNotExist(err) {
			t.Fatalf("file after watch %s %.40q: %v; want none", args[0], args[1], err)
		}
	}
}
