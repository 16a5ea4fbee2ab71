//go:build unix

package main

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/go-logr/logr"

	"github.com/watchjournal/watchjournal/journal/inspect"
)

// Ensure that no mode other than 0600 is ever seen on a watch's socket:
// a poller stats the path while serve creates it.
func TestServe_NoWindowWithAWiderMode(t *testing.T) {
	path := filepath.Join(tempDir(t), "j.db")
	j := openJournal(t, path)
	stop := make(chan struct{})
	seen := make(chan os.FileMode, 1)
	go func() {
		defer close(seen)
		for {
			select {
			case <-stop:
				return
			default:
			}
			if fi, err := os.Lstat(inspect.SocketPath(path)); err == nil && fi.Mode().Perm() != 0o600 {
				seen <- fi.Mode()
				return
			}
		}
	}()
	for range 20 {
		stopServe, err := inspect.Listen(inspect.SocketPath(path), inspect.Handler(j, nil, &inspect.Options{MaxWait: maxWait, PID: -1}), logr.Discard())
		if err != nil {
			t.Fatal(err)
		}
		stopServe()
	}
	close(stop)
	if m, ok := <-seen; ok {
		t.Errorf("the socket was seen with mode %v; want 0600 from the moment it exists", m)
	}
}
