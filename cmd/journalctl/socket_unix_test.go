//go:build unix

package main

import (
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"go.uber.org/zap"
)

// Ensure that the socket is 0600 from the moment it exists: listenPrivate
// creates it under a restrictive umask instead of chmod-ing it after the
// bind, and restores the umask.
func TestServe_SocketIsPrivateFromCreation(t *testing.T) {
	sock := filepath.Join(tempDir(t), "j.db.sock")
	umask := syscall.Umask(0o022)
	syscall.Umask(umask)
	ln, err := listenPrivate(sock)
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	fi, err := os.Lstat(sock)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode()&os.ModeSocket == 0 || fi.Mode().Perm() != 0o600 {
		t.Errorf("socket mode right after listenPrivate = %v; want a socket with mode 0600 before any chmod", fi.Mode())
	}
	if now := syscall.Umask(umask); now != umask {
		t.Errorf("umask after listenPrivate = %#o; want it restored to %#o", now, umask)
	}
}

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
			if fi, err := os.Lstat(socketPath(path)); err == nil && fi.Mode().Perm() != 0o600 {
				seen <- fi.Mode()
				return
			}
		}
	}()
	for range 20 {
		stopServe, err := serve(socketPath(path), (&server{j: j, maxWait: maxWait}).handler(), zap.NewNop())
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
