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
		{"a prefix keeps the key equal to it and the longer ones", []string{"wj/a"}, `KEY    UID  RESOURCEVERSION
wj/a   u1   11
wj/ab  u2   12
`},
		{"a namespace prefix", []string{"x/"}, "KEY  UID  RESOURCEVERSION\nx/a  u4   14\n"},
		{"a prefix nothing has", []string{"wj/c"}, "KEY  UID  RESOURCEVERSION\n"},
		{"JSON lines", []string{"wj/", "-o", "json"}, `{"key":"wj/a","uid":"u1","resourceVersion":"11"}
{"key":"wj/ab","uid":"u2","resourceVersion":"12"}
{"key":"wj/b","uid":"u3","resourceVersion":"13"}
`},
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
