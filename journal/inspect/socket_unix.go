//go:build unix

package inspect

import (
	"net"
	"os"
	"sync"
	"syscall"
)

// ownedByMe tells whether the process's user owns the file fi describes.
func ownedByMe(fi os.FileInfo) bool {
	st, ok := fi.Sys().(*syscall.Stat_t)
	return ok && int(st.Uid) == os.Getuid()
}

// umaskMu serializes listenPrivate's umask changes: the umask is the
// process's, and two overlapping changes could restore the wrong one.
var umaskMu sync.Mutex

// listenPrivate listens on the unix socket sock, created with mode 0600
// from the moment it exists: bind(2) creates the socket file with mode
// 0777 minus the umask, so the umask is 0177 around the bind. A chmod
// after the bind would leave a window in which another user could connect.
// The umask is the process's: a file another goroutine creates during
// the bind gets at most 0600 too (more restrictive, never less).
func listenPrivate(sock string) (net.Listener, error) {
	umaskMu.Lock()
	defer umaskMu.Unlock()
	old := syscall.Umask(0o177)
	defer syscall.Umask(old)
	return net.Listen("unix", sock)
}
