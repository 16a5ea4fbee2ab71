package main

import (
	"strings"
	"testing"
)

// A run of only the cache subjects replaces the cache section and keeps
// everything else; a file without one gets it before the hand-written part.
func TestSpliceCacheSection(t *testing.T) {
	section := func(s string) string { return cacheBegin + "\n" + s + "\n" + cacheEnd + "\n" }
	head, tail := "# Benchmarks\n\ntables\n\n", handWritten+"\nnotes\n"

	got := string(spliceCacheSection([]byte(head+tail), section("new")))
	if want := head + section("new") + "\n" + tail; got != want {
		t.Errorf("without a section:\n%s\nwant:\n%s", got, want)
	}
	got = string(spliceCacheSection([]byte(head+section("old")+"\n"+tail), section("new")))
	if want := head + section("new") + "\n" + tail; got != want {
		t.Errorf("with a section:\n%s\nwant:\n%s", got, want)
	}
	if strings.Contains(got, "old") {
		t.Errorf("the old section is still there:\n%s", got)
	}
	if got := string(oldCacheSection([]byte(head + section("old") + "\n" + tail))); got != section("old") {
		t.Errorf("oldCacheSection = %q; want %q", got, section("old"))
	}
	if got := oldCacheSection([]byte(head + tail)); got != nil {
		t.Errorf("oldCacheSection without one = %q; want nil", got)
	}
	got = string(spliceCacheSection([]byte("no markers\n"), section("new")))
	if want := "no markers\n\n" + section("new"); got != want {
		t.Errorf("without markers: %q; want %q", got, want)
	}
}
