package main

// One invocation's settings: how often journalctl polls and logs, how long
// it waits, and how its discovery backs off; tests shorten them.
//
// Invariant: every goroutine of one invocation (run) reads these settings
// from the settings that invocation was built with, handed to each command
// by run; none reads a package variable. Tests run the command line with
// settings of their own (runWith), so invocations of one test process,
// concurrent ones or one whose goroutines outlive its test, each keep
// their own. run uses defaultSettings, the values a user gets.

import (
	"context"
	"time"
)

// settings are one invocation's settings. Every field is set; none is
// changed once run has built the commands.
type settings struct {
	// pollInterval is how often a follower without a writer reopens the
	// file (events -f), and looks for the file's reader again while the
	// file changes hands: bbolt has no cross-process notification.
	pollInterval time.Duration
	// hangupPoll is how often a follower checks that the reader of its
	// output is still there (hangup_unix.go).
	hangupPoll time.Duration
	// progressEvery is how many list pages pass between two progress log
	// lines of watch and relist (progress.go).
	progressEvery int
	// relistPoll is how often relist reads the watch's status for
	// progress (relist_progress.go).
	relistPoll time.Duration
	// relistTimeout bounds how long relist waits for the loop to complete
	// a verify: a loop backing off from an unreachable apiserver may never.
	relistTimeout time.Duration
	// stillRetryingEvery is the least interval between two "still
	// retrying" lines of one failure (retrying.go).
	stillRetryingEvery time.Duration
	// discovery is how watch's discovery backs off (resolve.go).
	discovery discoveryBackoff
	// openEventsSource opens the source events reads first, given the
	// context, the file's path and pollInterval; tests wrap openSourceEvery
	// to count what is read.
	openEventsSource func(ctx context.Context, path string, poll time.Duration) (source, error)
}

// defaultSettings returns the settings of journalctl as users run it.
func defaultSettings() settings {
	return settings{
		pollInterval:       time.Second,
		hangupPoll:         200 * time.Millisecond,
		progressEvery:      100,
		relistPoll:         time.Second,
		relistTimeout:      5 * time.Minute,
		stillRetryingEvery: 30 * time.Second,
		discovery:          defaultDiscoveryBackoff(),
		openEventsSource:   openSourceEvery,
	}
}
