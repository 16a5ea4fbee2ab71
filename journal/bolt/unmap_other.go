//go:build !(linux || darwin || freebsd || netbsd || openbsd || dragonfly)

package bolt

const canMadvise = false

// madviseDontNeed does nothing on this platform.
func madviseDontNeed(uintptr, int64) error { return nil }
