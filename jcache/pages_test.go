//go:build linux

package jcache

import (
	"bufio"
	"os"
	"strconv"
	"strings"
	"testing"
)

// memStatus returns VmRSS, RssAnon and RssFile of the process in bytes,
// from /proc/self/status.
func memStatus(t *testing.T) (rss, anon, file int64) {
	t.Helper()
	f, err := os.Open("/proc/self/status")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		name, v, ok := strings.Cut(sc.Text(), ":")
		if !ok {
			continue
		}
		kb, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
		switch name {
		case "VmRSS":
			rss = kb << 10
		case "RssAnon":
			anon = kb << 10
		case "RssFile":
			file = kb << 10
		}
	}
	return rss, anon, file
}

// TestReplay_GivesBackPages: a replay of 20,000 stored ConfigMaps of
// about 1 KiB leaves the file's pages resident (RssFile grows by at least
// half the objects' bytes); the replay's drop gives them back (RssFile
// falls by at least half of them), and RssAnon does not change with it.
func TestReplay_GivesBackPages(t *testing.T) {
	defer func(p int) { replayPayload = p }(replayPayload)
	replayPayload = 1000
	const n = 20000
	j, keys := replayFile(t, n)
	if _, err := j.Settings().ReleaseMapped(); err != nil { // the writes' pages: start cold
		t.Fatal(err)
	}
	objBytes := int64(n * replayPayload)
	rss0, anon0, file0 := memStatus(t)

	h := &recorder{}
	r := replayRegistration(j, h, 0)
	if err := addEach(t.Context(), r, h); err != nil {
		t.Fatal(err)
	}
	sameKeys(t, "replay", h.adds, keys)
	rss1, anon1, file1 := memStatus(t)
	r.inf.f.releaseMapped("a replay")
	rss2, anon2, file2 := memStatus(t)
	t.Logf("file %.1f MiB; VmRSS / RssAnon / RssFile in MiB: cold %.1f / %.1f / %.1f, after the replay %.1f / %.1f / %.1f, after the drop %.1f / %.1f / %.1f",
		mib(fileSize(t, j.Path())),
		mib(rss0), mib(anon0), mib(file0), mib(rss1), mib(anon1), mib(file1), mib(rss2), mib(anon2), mib(file2))
	if file1-file0 < objBytes/2 {
		t.Errorf("the replay made %d bytes of the file resident, want at least half the objects' %d", file1-file0, objBytes)
	}
	if file1-file2 < objBytes/2 {
		t.Errorf("the drop gave back %d bytes, want at least half the objects' %d", file1-file2, objBytes)
	}
}

func mib(b int64) float64 { return float64(b) / (1 << 20) }

func fileSize(t *testing.T, path string) int64 {
	t.Helper()
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	return fi.Size()
}
