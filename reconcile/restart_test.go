package reconcile_test

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/resourceversion"
	"k8s.io/client-go/rest"

	"github.com/watchjournal/watchjournal/journal"
	"github.com/watchjournal/watchjournal/reconcile"
)

// childEnv marks the test binary re-executed as a journal process that the
// test can SIGKILL: a real crash, not a clean close.
const childEnv = "WATCHJOURNAL_TEST_CHILD"

// childMain runs a loop on $WJ_DB for $WJ_NS and prints every status change
// as one line on stdout until killed.
func childMain() int {
	res := journal.Resource{GVR: schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}, Namespace: os.Getenv("WJ_NS")}
	j, err := journal.Open(os.Getenv("WJ_DB"), &journal.Options{Resource: &res})
	if err != nil {
		fmt.Println("ERROR", err)
		return 1
	}
	cfg := &rest.Config{Host: os.Getenv("WJ_HOST"), BearerToken: os.Getenv("WJ_TOKEN"), TLSClientConfig: rest.TLSClientConfig{Insecure: true}}
	pageSize := int64(2)
	if v := os.Getenv("WJ_PAGE_SIZE"); v != "" {
		pageSize, _ = strconv.ParseInt(v, 10, 64)
	}
	l, err := reconcile.New(cfg, j, reconcile.Options{PageSize: pageSize, MinBackoff: 20 * time.Millisecond, MaxBackoff: 300 * time.Millisecond, Logger: logr.Discard()})
	if err != nil {
		fmt.Println("ERROR", err)
		return 1
	}
	go func() {
		var last reconcile.Status
		for {
			_ = l.WaitFor(context.Background(), func(s reconcile.Status) bool { return s != last })
			last = l.Status()
			fmt.Printf("STATUS phase=%s lists=%d watches=%d gone=%d events=%d rv=%s\n", last.Phase, last.Lists, last.Watches, last.Gone, last.Events, last.ResourceVersion)
		}
	}()
	_ = l.Run(context.Background())
	return 0
}

// child is a journal process under test.
type child struct {
	cmd   *exec.Cmd
	lines chan string
}

func (e *env) startChild() *child { return e.startChildWith(childOptions{}) }

// childOptions change how startChildWith runs the child.
type childOptions struct {
	proxied  bool    // talk to the apiserver through e.proxy
	pageSize int64   // list page size; 0 means 2
	cgroup   *cgroup // run in this cgroup
}

func (e *env) startChildWith(o childOptions) *child {
	e.t.Helper()
	cfg := e.cp.RESTConfig()
	if o.proxied {
		cfg = e.cp.ProxiedRESTConfig(e.proxy)
	}
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), childEnv+"=1", "WJ_DB="+e.path, "WJ_NS="+e.ns, "WJ_HOST="+cfg.Host, "WJ_TOKEN="+cfg.BearerToken)
	if o.pageSize > 0 {
		cmd.Env = append(cmd.Env, "WJ_PAGE_SIZE="+strconv.FormatInt(o.pageSize, 10))
	}
	cmd.Stderr = os.Stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	out, err := cmd.StdoutPipe()
	if err != nil {
		e.t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		e.t.Fatal(err)
	}
	if o.cgroup != nil {
		// Before the child has read its first page: the Go runtime's start
		// is all it has allocated.
		if err := o.cgroup.add(cmd.Process.Pid); err != nil {
			_ = cmd.Process.Kill()
			e.t.Fatal(err)
		}
	}
	c := &child{cmd: cmd, lines: make(chan string, 1000)}
	go func() {
		s := bufio.NewScanner(out)
		for s.Scan() {
			c.lines <- s.Text()
		}
		close(c.lines)
	}()
	e.t.Cleanup(c.kill)
	return c
}

// waitFor waits for a status line containing every one of parts.
func (c *child) waitFor(t *testing.T, parts ...string) {
	t.Helper()
	c.waitLine(t, fmt.Sprintf("%q", parts), func(line string) bool { return hasParts(line, parts) })
}

// waitForRV waits for a status line containing every one of parts whose
// rv= is rv or later: a bookmark (or another resource's write folded into
// one status change) can carry the child past rv without a line for rv
// itself. resourceVersions are compared with CompareResourceVersion, and
// only for equality where they are not well formed.
func (c *child) waitForRV(t *testing.T, rv string, parts ...string) {
	t.Helper()
	c.waitLine(t, fmt.Sprintf("%q and rv %s or later", parts, rv), func(line string) bool {
		_, got, _ := strings.Cut(line, " rv=")
		got, _, _ = strings.Cut(got, " ")
		cmp, err := resourceversion.CompareResourceVersion(got, rv)
		return hasParts(line, parts) && (got == rv || (err == nil && cmp >= 0))
	})
}

// hasParts reports whether line holds each of parts as a whole word.
func hasParts(line string, parts []string) bool {
	for _, p := range parts {
		if !strings.Contains(line+" ", p+" ") {
			return false
		}
	}
	return true
}

// waitLine waits up to 60 s for a status line that match accepts; it
// fails on an ERROR line, on the child's exit and on the timeout, with
// what (the awaited status) and the last status seen.
func (c *child) waitLine(t *testing.T, what string, match func(string) bool) {
	t.Helper()
	deadline := time.After(60 * time.Second)
	last := "(none)"
	for {
		select {
		case line, ok := <-c.lines:
			if !ok {
				t.Fatalf("child exited while waiting for %s; its last status: %s", what, last)
			}
			last = line
			if strings.HasPrefix(line, "ERROR") {
				t.Fatalf("child: %s", line)
			}
			if match(line) {
				return
			}
		case <-deadline:
			t.Fatalf("timed out waiting for child status %s; its last status: %s", what, last)
		}
	}
}

// kill sends SIGKILL and reaps the process.
func (c *child) kill() {
	if c.cmd.ProcessState != nil {
		return
	}
	_ = c.cmd.Process.Signal(syscall.SIGKILL)
	_ = c.cmd.Wait()
}

// openRead opens the journal after the child is dead.
func (e *env) openRead() *journal.Journal {
	e.t.Helper()
	j, err := journal.Open(e.path, &journal.Options{ReadOnly: true})
	if err != nil {
		e.t.Fatalf("open journal: %v", err)
	}
	e.t.Cleanup(func() { _ = j.Close() })
	return j
}

func eventStrings(t *testing.T, j *journal.Journal, ns string, from uint64) []string {
	t.Helper()
	evs, err := readAll(j, from)
	if err != nil {
		t.Fatal(err)
	}
	out := []string{}
	for _, ev := range evs {
		out = append(out, fmt.Sprintf("%s %s %s", ev.Type, strings.TrimPrefix(ev.Key, ns+"/"), ev.Origin))
	}
	return out
}

// Acceptance 2, scenarios S05 and S04: a process killed mid-watch and
// restarted on the same file gets exactly the changes made while it was
// down: live from the stored resourceVersion, or by a relist diff (origin
// restart) when compaction removed it; and nothing when nothing changed.
func TestLoop_RestartAfterKill(t *testing.T) {
	for _, compact := range []bool{false, true} {
		t.Run(fmt.Sprintf("compacted=%v", compact), func(t *testing.T) {
			e := newEnv(t)
			e.createAll("a", "b", "c")
			c := e.startChild()
			c.waitFor(t, "phase=Watching", "lists=1")
			c.kill()

			j := e.openRead()
			got := eventStrings(t, j, e.ns, 1)
			equal(t, "initial events", got, []string{"ADDED a relist", "ADDED b relist", "ADDED c relist"})
			h, _ := j.Head()
			_ = j.Close()

			// Nothing changed: a restart adds no event, and the verify
			// after the resume (its one list) none either.
			c = e.startChild()
			c.waitFor(t, "phase=Watching", "lists=1")
			c.kill()
			j = e.openRead()
			if h2, _ := j.Head(); h2 != h {
				t.Fatalf("head after a restart with no change = %d; want %d: %q", h2, h, eventStrings(t, j, e.ns, h+1))
			}
			_ = j.Close()

			e.delete("b")
			e.create("d")
			e.update("a")
			want := []string{"DELETED b watch", "ADDED d watch", "MODIFIED a watch"}
			if compact {
				e.compact()
				want = []string{"MODIFIED a restart", "DELETED b restart", "ADDED d restart"}
			}
			c = e.startChild()
			if compact {
				c.waitFor(t, "phase=Watching", "lists=1", "gone=1", "events=3")
			} else {
				c.waitFor(t, "phase=Watching", "events=3")
			}
			c.kill()
			j = e.openRead()
			equal(t, "events after the restart", eventStrings(t, j, e.ns, h+1), want)
			e.checkIndex(j)
		})
	}
}
