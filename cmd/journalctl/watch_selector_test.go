package main

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
)

// Ensure that watch restarts on its file with a label selector spelled
// another way that selects the same objects, and still refuses one that
// selects other objects (exit 2).
func TestWatch_EquivalentSelectorRestarts(t *testing.T) {
	srv := fakeAPIServer(t)
	dir := tempDir(t)
	kubeconfig, db := writeKubeconfig(t, dir, srv.URL), filepath.Join(dir, "cm.db")
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
