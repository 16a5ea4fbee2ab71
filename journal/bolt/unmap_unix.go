//go:build linux || darwin || freebsd || netbsd || openbsd || dragonfly

package bolt

import (
	"fmt"
	"os"

	"golang.org/x/sys/unix"
)

const canMadvise = true

// madviseDontNeed drops the resident pages of [addr, addr+n), rounded down
// to whole OS pages, from the process's mappings. The region must be
// mapped (unmap.go: inside a bbolt read transaction).
func madviseDontNeed(addr uintptr, n int64) error {
	ps := int64(os.Getpagesize())
	n -= n % ps
	if addr == 0 || n <= 0 {
		return nil
	}
	if _, _, e := unix.Syscall(unix.SYS_MADVISE, addr, uintptr(n), unix.MADV_DONTNEED); e != 0 {
		return fmt.Errorf("bolt: madvise(MADV_DONTNEED) over the memory map: %w", e)
	}
	return nil
}
