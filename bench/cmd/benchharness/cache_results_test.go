package main

import (
	"strings"
	"testing"
)

// A run of only the cache subjects replaces the cache section and keeps
// everything else; a file without one gets it before the hand-written part.
// checkSplice checks spliceSection and oldSection on a file of head and
// tail, with a section between begin and end: one is added before tail,
// one already there is replaced, and oldSection returns it. It returns the
// file with the section replaced.
func checkSplice(t *testing.T, head, tail, begin, end string) string {
	t.Helper()
	section := func(s string) string { return begin + "\n" + s + "\n" + end + "\n" }
	got := string(spliceSection([]byte(head+tail), begin, end, section("new")))
	if want := head + section("new") + "\n" + tail; got != want {
		t.Errorf("without a section:\n%s\nwant:\n%s", got, want)
	}
	got = string(spliceSection([]byte(head+section("old")+"\n"+tail), begin, end, section("new")))
	if want := head + section("new") + "\n" + tail; got != want {
		t.Errorf("with a section:\n%s\nwant:\n%s", got, want)
	}
	if old := string(oldSection([]byte(head+section("old")+"\n"+tail), begin, end)); old != section("old") {
		t.Errorf("oldSection = %q; want %q", old, section("old"))
	}
	return got
}

// verdicts returns each of targets' state and measure by its name.
func verdicts(targets []target) map[string]string {
	got := map[string]string{}
	for _, x := range targets {
		got[x.name] = x.state + " " + x.measured
	}
	return got
}

func TestSpliceCacheSection(t *testing.T) {
	section := func(s string) string { return cacheBegin + "\n" + s + "\n" + cacheEnd + "\n" }
	head, tail := "# Benchmarks\n\ntables\n\n", handWritten+"\nnotes\n"

	got := checkSplice(t, head, tail, cacheBegin, cacheEnd)
	if strings.Contains(got, "old") {
		t.Errorf("the old section is still there:\n%s", got)
	}
	if got := oldSection([]byte(head+tail), cacheBegin, cacheEnd); got != nil {
		t.Errorf("oldSection without one = %q; want nil", got)
	}
	got = string(spliceSection([]byte("no markers\n"), cacheBegin, cacheEnd, section("new")))
	if want := "no markers\n\n" + section("new"); got != want {
		t.Errorf("without markers: %q; want %q", got, want)
	}
}
