//go:build unix

package inspect

import (
	"os"
	"path/filepath"
	"syscall"
	"testing"
)

// Ensure that the socket is 0600 from the moment it exists: listenPrivate
// creates it under a restrictive umask instead of chmod-ing it after the
// bind, and restores the umask.
func TestServe_SocketIsPrivateFromCreation(t *testing.T) {
	sock := filepath.Join(t.TempDir(), "j.db.sock")
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
