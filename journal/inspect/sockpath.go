package inspect

// Where a journal's socket is.
//
// A unix socket's path must fit the kernel's sun_path: 108 bytes on
// Linux, 104 on macOS and the BSDs, counting the NUL. SocketPath is
// FILE.sock, beside the file, whenever that fits (maxSocketPath), so that
// it shows next to the file. A longer one is replaced by a path of fixed
// length that depends only on the file: <hash>.sock, the hash of the
// file's absolute path with the directory's symlinks resolved, in a
// directory only the user can enter ($XDG_RUNTIME_DIR, or
// os.TempDir()/watchjournal-<uid>; Listen creates it 0700 and refuses it
// when another user owns it or can enter it). Which of the two a file
// gets is decided on that absolute path too, so every name of the file
// (relative, through a symlink) finds the one socket: the server and
// every client compute it from the file's path, and SocketPath stays the
// one way to find a journal's server.

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
)

// maxSocketPath is the longest socket path that fits sun_path with its
// NUL on this system.
func maxSocketPath() int {
	if runtime.GOOS == "linux" {
		return 107
	}
	return 103
}

// SocketPath returns the path of the socket that serves the journal file
// at db, where journalctl looks for it: db + ".sock" when the file's
// absolute path with ".sock" fits a unix socket path (the absolute one
// when db + ".sock" itself does not); otherwise <hash of that absolute
// path>.sock in the user's own socket directory (runtimeSocketDir).
func SocketPath(db string) string {
	abs := canonical(db) + ".sock"
	switch {
	case len(abs) > maxSocketPath():
		sum := sha256.Sum256([]byte(abs))
		return filepath.Join(runtimeSocketDir(), hex.EncodeToString(sum[:12])+".sock")
	case len(db+".sock") > maxSocketPath():
		return abs
	default:
		return db + ".sock"
	}
}

// runtimeSocketDir is the directory of the sockets whose FILE.sock path
// is too long: $XDG_RUNTIME_DIR when set (the user's own, 0700), else
// os.TempDir()/watchjournal-<uid>.
func runtimeSocketDir() string {
	if d := os.Getenv("XDG_RUNTIME_DIR"); d != "" && filepath.IsAbs(d) {
		return d
	}
	return filepath.Join(os.TempDir(), "watchjournal-"+strconv.Itoa(os.Getuid()))
}

// canonical returns db's absolute path, its directory's symlinks
// resolved (when it exists), so that every name of one file hashes alike.
func canonical(db string) string {
	abs, err := filepath.Abs(db)
	if err != nil {
		return filepath.Clean(db)
	}
	dir, base := filepath.Split(abs)
	if real, err := filepath.EvalSymlinks(dir); err == nil {
		return filepath.Join(real, base)
	}
	return abs
}

// errSharedDir is returned when the socket directory is not the user's
// alone.
var errSharedDir = errors.New("inspect: the socket directory is not private to this user")

// prepareSocketDir makes sure that sock's directory exists, when it is
// runtimeSocketDir: created 0700, and refused unless it is a directory
// (not a symlink) that this user owns and no other can enter. Another
// directory, the journal file's own, is the caller's.
func prepareSocketDir(sock string) error {
	dir := filepath.Dir(sock)
	if dir != runtimeSocketDir() {
		return nil
	}
	if err := os.Mkdir(dir, 0o700); err != nil && !errors.Is(err, os.ErrExist) {
		return fmt.Errorf("inspect: %w", err)
	}
	fi, err := os.Lstat(dir)
	if err != nil {
		return fmt.Errorf("inspect: %w", err)
	}
	if !fi.IsDir() || fi.Mode().Perm()&0o077 != 0 || !ownedByMe(fi) {
		return fmt.Errorf("%w: %s (%v)", errSharedDir, dir, fi.Mode())
	}
	return nil
}
