//go:build !unix

package inspect

import (
	"net"
	"os"
)

// listenPrivate listens on the unix socket sock and makes it 0600. Without
// a umask (Windows) the mode is set after the bind.
func listenPrivate(sock string) (net.Listener, error) {
	ln, err := net.Listen("unix", sock)
	if err != nil {
		return nil, err
	}
	if err := os.Chmod(sock, 0o600); err != nil {
		_ = ln.Close()
		return nil, err
	}
	return ln, nil
}

// ownedByMe: without unix owners, the directory's mode is the check.
func ownedByMe(os.FileInfo) bool { return true }
