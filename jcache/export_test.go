package jcache

// SetReplayChunk sets the replay's chunk size in objects, for tests; it
// returns a function that restores it.
func SetReplayChunk(n int) (restore func()) {
	old := replayChunk
	replayChunk = n
	return func() { replayChunk = old }
}

// IndexReads returns how many index reads were served by an index kept on
// disk and how many by evaluating the index at read time, since the
// process started.
func IndexReads() (disk, scan int64) { return indexReads.disk.Load(), indexReads.scan.Load() }
