package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/watchjournal/watchjournal/internal/testing/controlplane"
)

// The demo is the main job; it checks its own result (events and index).
// This runs it with a freshly built journalctl, as `make demo` does.
func TestDemo(t *testing.T) {
	bin, err := controlplane.BinDir(controlplane.Options{})
	if err == nil {
		_, err = os.Stat(filepath.Join(bin, controlplane.APIServerBinary))
	}
	if err != nil {
		if os.Getenv(controlplane.EnvRequire) == "1" {
			t.Fatalf("control plane binaries missing: %v", err)
		}
		t.Skipf("control plane binaries missing (make controlplane): %v", err)
	}
	journalctl := filepath.Join(t.TempDir(), "journalctl")
	out, err := exec.Command("go", "build", "-o", journalctl, "github.com/watchjournal/watchjournal/cmd/journalctl").CombinedOutput()
	if err != nil {
		t.Fatalf("go build journalctl: %v\n%s", err, out)
	}
	if err := run(journalctl, false); err != nil {
		t.Fatal(err)
	}
}
