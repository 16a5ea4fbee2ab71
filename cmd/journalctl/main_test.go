package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	bbolt "go.etcd.io/bbolt"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/watchjournal/watchjournal/journal"
)

// t0 is the time of the first test event.
var t0 = time.Date(2026, 7, 1, 12, 0, 0, 123_000_000, time.UTC)

var testResource = journal.Resource{GVR: schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}, Namespace: "wj"}

// ev returns a watch event at t0+sec seconds, its object a stub naming key.
func ev(typ journal.EventType, key, uid, rv string, sec int) journal.Event {
	return journal.Event{
		Type: typ, Key: key, UID: uid, ResourceVersion: rv, Time: t0.Add(time.Duration(sec) * time.Second),
		Origin: journal.OriginWatch, Object: []byte(`{"metadata":{"name":"` + key + `"}}`),
	}
}

// testEvents are offsets 1 to 4 of the test journal.
func testEvents() []journal.Event {
	del := ev(journal.Deleted, "wj/b", "u2", "11", 3)
	del.Origin, del.Object = journal.OriginRelist, nil
	mod := ev(journal.Modified, "wj/a", "u1", "12", 2)
	mod.PrevResourceVersion = "10"
	return []journal.Event{ev(journal.Added, "wj/a", "u1", "10", 0), ev(journal.Added, "wj/b", "u2", "11", 1), mod, del}
}

// tempDir returns a short temporary directory: a unix socket path must fit
// in 108 bytes, which t.TempDir's long names may not.
func tempDir(t *testing.T) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "jctl")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	return dir
}

// openJournal opens dir/j.db for writing, for the test's duration.
func openJournal(t *testing.T, path string) *journal.Journal {
	t.Helper()
	j, err := journal.Open(path, &journal.Options{Resource: &testResource, NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { j.Close() })
	return j
}

// appendEvents appends evs in one transaction and sets rv.
func appendEvents(t *testing.T, j *journal.Journal, rv string, evs ...journal.Event) {
	t.Helper()
	err := j.Writer().Update(func(tx *journal.Tx) error {
		for i := range evs {
			if _, err := tx.Append(&evs[i]); err != nil {
				return err
			}
		}
		return tx.SetResourceVersion(rv)
	})
	if err != nil {
		t.Fatal(err)
	}
}

// writeJournal creates a closed journal file holding testEvents.
func writeJournal(t *testing.T) string {
	t.Helper()
	path := filepath.Join(tempDir(t), "j.db")
	j, err := journal.Open(path, &journal.Options{Resource: &testResource, NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	appendEvents(t, j, "12", testEvents()...)
	if err := j.Close(); err != nil {
		t.Fatal(err)
	}
	return path
}

// output is a writer tests can wait on: every write wakes waiters.
type output struct {
	mu      sync.Mutex
	buf     bytes.Buffer
	changed chan struct{}
}

func newOutput() *output { return &output{changed: make(chan struct{})} }

func (o *output) Write(p []byte) (int, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	close(o.changed)
	o.changed = make(chan struct{})
	return o.buf.Write(p)
}

func (o *output) String() string {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.buf.String()
}

// waitFor waits until the output contains s; it fails the test after 5 s.
func (o *output) waitFor(t *testing.T, s string) {
	t.Helper()
	o.waitForWithin(t, s, 5*time.Second)
}

// waitForWithin waits until the output contains s; it fails the test
// after d, printing the output.
func (o *output) waitForWithin(t *testing.T, s string, d time.Duration) {
	t.Helper()
	o.waitMatch(t, d, func(out string) bool { return strings.Contains(out, s) }, fmt.Sprintf("want it to contain %q", s))
}

// runCLI runs journalctl args to completion.
func runCLI(args ...string) (stdout, stderr string, code int) {
	var out, errOut bytes.Buffer
	code = run(context.Background(), args, &out, &errOut)
	return out.String(), errOut.String(), code
}

// startCLI runs journalctl args in the background until ctx is done; the
// exit status arrives on the returned channel.
func startCLI(ctx context.Context, args ...string) (stdout, stderr *output, code <-chan int) {
	stdout, stderr = newOutput(), newOutput()
	c := make(chan int, 1)
	go func() { c <- run(ctx, args, stdout, stderr) }()
	return stdout, stderr, c
}

// startCLIWith is startCLI with the invocation's settings conf.
func startCLIWith(ctx context.Context, conf settings, args ...string) (stdout, stderr *output, code <-chan int) {
	stdout, stderr = newOutput(), newOutput()
	c := make(chan int, 1)
	go func() { c <- runWith(ctx, conf, args, stdout, stderr) }()
	return stdout, stderr, c
}

// runCLIWith is runCLI with the invocation's settings conf.
func runCLIWith(conf settings, args ...string) (stdout, stderr string, code int) {
	var out, errOut bytes.Buffer
	code = runWith(context.Background(), conf, args, &out, &errOut)
	return out.String(), errOut.String(), code
}

// tuned returns the default settings changed by change.
func tuned(change func(*settings)) settings {
	conf := defaultSettings()
	change(&conf)
	return conf
}

// fastPoll returns settings whose follower reopens the file every 5ms.
func fastPoll() settings {
	return tuned(func(c *settings) { c.pollInterval = 5 * time.Millisecond })
}

// exitStatus waits for a background run's exit status.
func exitStatus(t *testing.T, code <-chan int) int {
	t.Helper()
	select {
	case c := <-code:
		return c
	case <-time.After(5 * time.Second):
		t.Fatal("journalctl did not exit within 5 s")
		return -1
	}
}

func TestRun_FileErrors(t *testing.T) {
	dir := tempDir(t)
	corrupt := filepath.Join(dir, "corrupt.db")
	junk := make([]byte, 64<<10)
	rand.Read(junk)
	if err := os.WriteFile(corrupt, junk, 0o600); err != nil {
		t.Fatal(err)
	}
	foreign := filepath.Join(dir, "foreign.db")
	db, err := bbolt.Open(foreign, 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	err = db.Update(func(tx *bbolt.Tx) error { _, err := tx.CreateBucket([]byte("other")); return err })
	if cerr := db.Close(); err != nil || cerr != nil {
		t.Fatal(err, cerr)
	}
	for _, tc := range []struct {
		name, path, want string
	}{
		{"a missing file says it does not exist", filepath.Join(dir, "missing.db"), "does not exist"},
		{"random bytes are reported corrupt", corrupt, "corrupt"},
		{"another program's bbolt file is reported foreign", foreign, "not a watchjournal database"},
	} {
		for _, cmd := range []string{"events", "index", "stats", "verify"} {
			t.Run(tc.name+"/"+cmd, func(t *testing.T) {
				stdout, stderr, code := runCLI(cmd, "--db", tc.path)
				if code != 2 || stdout != "" {
					t.Errorf("exit %d, stdout %q; want 2 and nothing", code, stdout)
				}
				if !strings.HasPrefix(stderr, "journalctl: ") || strings.Count(stderr, "\n") != 1 ||
					!strings.Contains(stderr, tc.want) || !strings.Contains(stderr, tc.path) {
					t.Errorf("stderr %q; want one line naming %s and saying %q", stderr, tc.path, tc.want)
				}
			})
		}
	}
}

func TestRun_UsageErrors(t *testing.T) {
	path := writeJournal(t)
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"unknown command", []string{"tail"}, `unknown command "tail"`},
		{"unknown flag", []string{"events", "--db", path, "--bogus"}, "unknown flag: --bogus"},
		{"missing --db", []string{"stats"}, `required flag(s) "db" not set`},
		{"bad output format", []string{"index", "--db", path, "-o", "wide"}, `unknown output format "wide": want table, json, yaml or name`},
		{"bad output format for stats", []string{"stats", "--db", path, "-o", "yaml"}, `unknown output format "yaml"`},
		{"-n with -A", []string{"watch", "cm", "--db", path, "-n", "x", "-A"}, "none of the others can be"},
		{"watch without a resource", []string{"watch", "--db", path}, "watch needs the RESOURCE"},
		{"bad log level", []string{"watch", "cm", "--db", path, "--log-level", "loud"}, "--log-level"},
		{"bad --retain-bytes", []string{"watch", "cm", "--db", path, "--retain-bytes", "lots"}, `--retain-bytes "lots": want bytes`},
		{"fractional --retain-hard-bytes", []string{"watch", "cm", "--db", path, "--retain-hard-bytes", "0.5"}, `--retain-hard-bytes "0.5": want a whole`},
		{"negative --retain-age", []string{"watch", "cm", "--db", path, "--retain-age", "-1h"}, "--retain-age -1h0m0s: want a duration of 0 or more"},
		{"bad output format for verify", []string{"verify", "--db", path, "-o", "yaml"}, `unknown output format "yaml"`},
		{"negative --verify-interval", []string{"watch", "cm", "--db", path, "--verify-interval", "-1s"}, "--verify-interval -1s: want a duration of 0 or more"},
		{"negative --idle-timeout", []string{"watch", "cm", "--db", path, "--idle-timeout", "-1m"}, "--idle-timeout -1m0s: want a duration of 0 or more"},
		{"bad --request-timeout", []string{"watch", "cm", "--db", path, "--request-timeout", "soon"}, `invalid argument "soon" for "--request-timeout"`},
		{"relist with an argument", []string{"relist", "--db", path, "now"}, `unknown command "now"`},
		{"bad --retain-events", []string{"watch", "cm", "--db", path, "--retain-events", "-1"}, `invalid argument "-1" for "--retain-events"`},
		{"--page-size 0", []string{"watch", "cm", "--db", path, "--page-size", "0"}, "--page-size 0: want 1 to 10000 objects per list page"},
		{"negative --page-size", []string{"watch", "cm", "--db", path, "--page-size", "-5"}, "--page-size -5: want 1 to 10000"},
		{"--page-size too large", []string{"watch", "cm", "--db", path, "--page-size", "10001"}, "--page-size 10001: want 1 to 10000"},
		{"version with an argument", []string{"version", "now"}, `unknown command "now"`},
		{"several resources with --db", []string{"watch", "cm,secrets", "--db", path}, "several resources take --dir DIR"},
		{"watch without --db or --dir", []string{"watch", "cm"}, "[db dir] is required"},
		{"--db with --dir", []string{"watch", "cm", "--db", path, "--dir", "x"}, "none of the others can be"},
		{"an empty resource in the list", []string{"watch", "cm,,secrets", "--dir", filepath.Dir(path)}, "an empty resource name"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, stderr, code := runCLI(tc.args...)
			if code != 1 || !strings.Contains(stderr, tc.want) {
				t.Errorf("journalctl %v: exit %d, stderr %q; want 1 and %q", tc.args, code, stderr, tc.want)
			}
		})
	}
}

func TestVersion(t *testing.T) {
	stdout, stderr, code := runCLI("version")
	want := regexp.MustCompile(`^journalctl \S+ ` + regexp.QuoteMeta(runtime.Version()) + "\n$")
	if code != 0 || !want.MatchString(stdout) {
		t.Errorf("version: exit %d, stdout %q, stderr %q; want 0 and %s", code, stdout, stderr, want)
	}
}
