package jcache

// SetReplayChunk sets the replay's chunk size in objects, for tests; it
// returns a function that restores it.
func SetReplayChunk(n int) (restore func()) {
	old := replayChunk
	replayChunk = n
	return func() { replayChunk = old }
}
