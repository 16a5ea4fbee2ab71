package main

import (
	"path/filepath"
	"testing"

	"github.com/watchjournal/watchjournal/journal"
)

// writeIndexJournal creates a closed journal whose index holds wj/a, wj/ab,
// wj/b and x/a, and returns its path.
func writeIndexJournal(t *testing.T) string {
	t.Helper()
	path := filepath.Join(tempDir(t), "j.db")
	j := openJournal(t, path)
	appendEvents(t, j, "20",
		ev(journal.Added, "x/a", "u4", "14", 0),
		ev(journal.Added, "wj/b", "u3", "13", 0),
		ev(journal.Added, "wj/ab", "u2", "12", 0),
		ev(journal.Added, "wj/a", "u1", "11", 0),
	)
	if err := j.Close(); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestIndex_File(t *testing.T) {
	path := writeIndexJournal(t)
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"every key in key order", nil, `KEY    UID  RESOURCEVERSION
wj/a   u1   11
wj/ab  u2   12
wj/b   u3   13
x/a    u4   14
`},
		{"a prefix keeps the key equal to it and the longer ones", []string{"--prefix", "wj/a"}, `KEY    UID  RESOURCEVERSION
wj/a   u1   11
wj/ab  u2   12
`},
		{"a namespace prefix", []string{"x/", "--prefix"}, "KEY  UID  RESOURCEVERSION\nx/a  u4   14\n"},
		{"a prefix nothing has", []string{"--prefix", "wj/c"}, "KEY  UID  RESOURCEVERSION\n"},
		{"one JSON array", []string{"--prefix", "wj/", "-o", "json"}, `[
{"key":"wj/a","uid":"u1","resourceVersion":"11"},
{"key":"wj/ab","uid":"u2","resourceVersion":"12"},
{"key":"wj/b","uid":"u3","resourceVersion":"13"}
]
`},
		{"a key is exact: wj/a is not wj/ab", []string{"wj/a"}, "KEY   UID  RESOURCEVERSION\nwj/a  u1   11\n"},
		{"-n NS and a name", []string{"-n", "wj", "ab"}, "KEY    UID  RESOURCEVERSION\nwj/ab  u2   12\n"},
		{"-n NS alone: the namespace's objects", []string{"-n", "x"}, "KEY  UID  RESOURCEVERSION\nx/a  u4   14\n"},
		{"a key as one JSON object", []string{"wj/b", "-o", "json"}, `{"key":"wj/b","uid":"u3","resourceVersion":"13"}` + "\n"},
		{"a key as YAML", []string{"wj/b", "-o", "yaml"}, "key: wj/b\nresourceVersion: \"13\"\nuid: u3\n"},
		{"a prefix as a YAML sequence", []string{"--prefix", "x/", "-o", "yaml"}, "- key: x/a\n  resourceVersion: \"14\"\n  uid: u4\n"},
		{"no match as an empty YAML sequence", []string{"--prefix", "zz", "-o", "yaml"}, "[]\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			stdout, stderr, code := runCLI(append([]string{"index", "--db", path}, tc.args...)...)
			if code != 0 || stdout != tc.want {
				t.Errorf("index %v: exit %d, stdout\n%s\nstderr %q; want 0 and\n%s", tc.args, code, stdout, stderr, tc.want)
			}
		})
	}
}

func TestScanStart(t *testing.T) {
	for _, tc := range []struct{ prefix, want string }{
		{"", ""},
		{"wj/a", "wj/`\xff"},
		{"wj/\x00", "wj/"},
		{"a", "`\xff"},
	} {
		if got := scanStart(tc.prefix); got != tc.want {
			t.Errorf("scanStart(%q) = %q; want %q", tc.prefix, got, tc.want)
		}
		if tc.prefix != "" && scanStart(tc.prefix) >= tc.prefix {
			t.Errorf("scanStart(%q) = %q; want a key before the prefix", tc.prefix, scanStart(tc.prefix))
		}
	}
}

// An exact key never matches a longer key that starts with it: index
// app/cm1 once printed app/cm10 for a deleted cm1.
func TestIndex_File_ExactKey(t *testing.T) {
	path := filepath.Join(tempDir(t), "j.db")
	j := openJournal(t, path)
	appendEvents(t, j, "20", ev(journal.Added, "app/cm1", "u1", "11", 0), ev(journal.Added, "app/cm10", "u2", "12", 0))
	appendEvents(t, j, "21", ev(journal.Deleted, "app/cm1", "u1", "21", 1))
	if err := j.Close(); err != nil {
		t.Fatal(err)
	}
	stdout, stderr, code := runCLI("index", "--db", path, "app/cm1")
	want := `journalctl: "app/cm1": not in the index (deleted, or never seen); --prefix matches the keys that start with it` + "\n"
	if code != 1 || stdout != "" || stderr != want {
		t.Errorf("index app/cm1 after its delete: exit %d, stdout %q, stderr %q; want 1, nothing and %q", code, stdout, stderr, want)
	}
}
