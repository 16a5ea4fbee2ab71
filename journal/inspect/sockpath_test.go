package inspect_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/watchjournal/watchjournal/journal"
	"github.com/watchjournal/watchjournal/journal/inspect"
)

// longDir returns a new directory whose path is longer than any unix
// socket path.
func longDir(t *testing.T) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), strings.Repeat("d", 60), strings.Repeat("e", 60))
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	return dir
}

// Ensure that a journal whose FILE.sock path is longer than a unix socket
// path can hold is served, and reached through SocketPath, with the
// runtime directory from $XDG_RUNTIME_DIR and without it (TMPDIR's
// watchjournal-<uid>, created 0700); a name of the file through a symlink
// finds the same socket.
func TestServe_LongPath(t *testing.T) {
	for _, xdg := range []bool{true, false} {
		t.Run(map[bool]string{true: "XDG_RUNTIME_DIR", false: "TMPDIR"}[xdg], func(t *testing.T) {
			run := t.TempDir()
			if err := os.Chmod(run, 0o700); err != nil {
				t.Fatal(err)
			}
			if xdg {
				t.Setenv("XDG_RUNTIME_DIR", run)
			} else {
				t.Setenv("XDG_RUNTIME_DIR", "")
				t.Setenv("TMPDIR", run)
			}
			dir := longDir(t)
			j, err := journal.Open(filepath.Join(dir, "configmaps.v1.db"), &journal.Options{NoSync: true})
			if err != nil {
				t.Fatal(err)
			}
			defer j.Close()
			sock := inspect.SocketPath(j.Path())
			if len(sock) > 103 || !strings.HasPrefix(sock, run+string(filepath.Separator)) {
				t.Fatalf("SocketPath(%d bytes) = %q (%d bytes); want at most 103 bytes under %s", len(j.Path()), sock, len(sock), run)
			}
			link := filepath.Join(t.TempDir(), "link")
			if err := os.Symlink(dir, link); err != nil {
				t.Fatal(err)
			}
			if via := inspect.SocketPath(filepath.Join(link, "configmaps.v1.db")); via != sock {
				t.Errorf("SocketPath through a symlink = %q; want %q", via, sock)
			}
			ctx, cancel := context.WithCancel(context.Background())
			served := make(chan error, 1)
			go func() { served <- inspect.Serve(ctx, j, nil, nil) }()
			c := inspect.NewClient(sock)
			defer c.Close()
			deadline := time.Now().Add(10 * time.Second)
			for {
				_, err := c.Head(ctx)
				if err == nil {
					break
				}
				select {
				case err := <-served:
					t.Fatalf("Serve = %v", err)
				default:
				}
				if !errors.Is(err, inspect.ErrNoServer) || time.Now().After(deadline) {
					t.Fatalf("Head = %v", err)
				}
				time.Sleep(10 * time.Millisecond) // until the socket listens
			}
			if fi, err := os.Stat(filepath.Dir(sock)); err != nil || fi.Mode().Perm() != 0o700 {
				t.Errorf("the socket's directory: %v, %v; want mode 0700", fi.Mode(), err)
			}
			cancel()
			if err := <-served; err != nil {
				t.Fatalf("Serve = %v", err)
			}
			if _, err := os.Lstat(sock); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("the socket after Serve returned: %v; want it removed", err)
			}
		})
	}
}

// Ensure that a long path's socket is not served from a runtime directory
// other users can enter.
func TestServe_LongPath_SharedDirRefused(t *testing.T) {
	run := t.TempDir()
	if err := os.Chmod(run, 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv("XDG_RUNTIME_DIR", run)
	j, err := journal.Open(filepath.Join(longDir(t), "configmaps.v1.db"), &journal.Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	defer j.Close()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if err := inspect.Serve(ctx, j, nil, nil); err == nil || !strings.Contains(err.Error(), "not private") {
		t.Errorf("Serve in a 0755 runtime directory = %v; want a refusal", err)
	}
}
