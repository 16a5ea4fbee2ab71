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

	got := string(spliceSection([]byte(head+tail), cacheBegin, cacheEnd, section("new")))
	if want := head + section("new") + "\n" + tail; got != want {
		t.Errorf("without a section:\n%s\nwant:\n%s", got, want)
	}
	got = string(spliceSection([]byte(head+section("old")+"\n"+tail), cacheBegin, cacheEnd, section("new")))
	if want := head + section("new") + "\n" + tail; got != want {
		t.Errorf("with a section:\n%s\nwant:\n%s", got, want)
	}
	if strings.Contains(got, "old") {
		t.Errorf("the old section is still there:\n%s", got)
	}
	if got := string(oldSection([]byte(head+section("old")+"\n"+tail), cacheBegin, cacheEnd)); got != section("old") {
		t.Errorf("oldSection = %q; want %q", got, section("old"))
	}
	if got := oldSection([]byte(head+tail), cacheBegin, cacheEnd); got != nil {
		t.Errorf("oldSection without one = %q; want nil", got)
	}
	got = string(spliceSection([]byte("no markers\n"), cacheBegin, cacheEnd, section("new")))
	if want := "no markers\n\n" + section("new"); got != want {
		t.Errorf("without markers: %q; want %q", got, want)
	}
}
