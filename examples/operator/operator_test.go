package main

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/watchjournal/watchjournal/internal/testing/controlplane"
	"github.com/watchjournal/watchjournal/journal"
)

// consumer is the journal consumer of the operator's Exact source: the
// controller "mirror", ConfigMaps.
const consumer = "exact/mirror/v1/ConfigMap"

// child is the operator running as a separate process.
type child struct {
	cmd *exec.Cmd

	mu         sync.Mutex
	reconciled map[string]int
	gets       map[string]int // GETs of single ConfigMaps the operator sent
	committed  uint64
	head       uint64
	changed    chan struct{}
	exited     chan struct{}
}

func startChild(t *testing.T, bin string, args ...string) *child {
	t.Helper()
	c := &child{cmd: exec.Command(bin, args...), reconciled: map[string]int{}, gets: map[string]int{}, changed: make(chan struct{}, 1), exited: make(chan struct{})}
	out, err := c.cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	c.cmd.Stderr = &prefixWriter{t: t}
	if err := c.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		defer close(c.exited)
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			line := sc.Text()
			c.mu.Lock()
			var cm, h uint64
			if k, ok := strings.CutPrefix(line, "reconcile "); ok {
				c.reconciled[k]++
			} else if k, ok := strings.CutPrefix(line, "get configmap "); ok {
				c.gets[k]++
			} else if n, _ := fmt.Sscanf(line, "committed %d head %d", &cm, &h); n == 2 {
				c.committed, c.head = cm, h
			}
			c.mu.Unlock()
			select {
			case c.changed <- struct{}{}:
			default:
			}
		}
		_ = c.cmd.Wait()
	}()
	t.Cleanup(func() { _ = c.cmd.Process.Kill(); <-c.exited })
	return c
}

// waitFor checks cond on every line the child prints and every 200 ms.
func (c *child) waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.After(90 * time.Second)
	for !cond() {
		select {
		case <-c.changed:
		case <-time.After(200 * time.Millisecond):
		case <-c.exited:
			t.Fatalf("operator exited while waiting for %s", what)
		case <-deadline:
			c.mu.Lock()
			t.Fatalf("timed out waiting for %s; reconciled %v, committed %d head %d", what, c.reconciled, c.committed, c.head)
		}
	}
}

// checkGets fails t if the operator sent a GET for a ConfigMap other than
// its status one: it reads the ConfigMaps it reconciles from the journal.
func (c *child) checkGets(t *testing.T, status string) {
	t.Helper()
	c.mu.Lock()
	defer c.mu.Unlock()
	for k, n := range c.gets {
		if k != status {
			t.Errorf("the operator sent %d GET(s) of %s; want none (Reconcile reads it from the journal); all GETs %v", n, k, c.gets)
		}
	}
	if c.gets[status] == 0 {
		t.Errorf("no GET of the status ConfigMap %s seen; want the GET counter to work (GETs %v)", status, c.gets)
	}
}

func (c *child) keys() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []string
	for k := range c.reconciled {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

type prefixWriter struct{ t *testing.T }

func (w *prefixWriter) Write(p []byte) (int, error) {
	w.t.Logf("operator: %s", strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

// The example operator is killed with SIGKILL while ConfigMaps change;
// more change, are deleted and recreated while it is down and etcd is
// compacted. On restart it reconciles exactly the keys that changed while it
// was down plus those whose events it had not committed when killed, and
// none of the untouched ones.
func TestOperator_RestartReconcilesExactlyWhatChanged(t *testing.T) {
	cp := controlplane.StartT(t, controlplane.Options{})
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	bin := filepath.Join(t.TempDir(), "operator")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	ns, statusNS := "op", "op-status"
	kube := cp.CreateNamespaceT(t, ns)
	cp.CreateNamespaceT(t, statusNS)
	cms := kube.CoreV1().ConfigMaps(ns)
	set := func(name, value string) {
		t.Helper()
		cm, err := cms.Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			if _, err := cms.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name}, Data: map[string]string{"value": value}}, metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
			return
		}
		cm.Data = map[string]string{"value": value}
		if _, err := cms.Update(ctx, cm, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	key := func(i int) string { return fmt.Sprintf("k%02d", i) }
	const n = 20
	for i := 0; i < n; i++ {
		set(key(i), "v0")
	}
	dir := filepath.Join(t.TempDir(), "cache")
	args := []string{"--kubeconfig", cp.KubeconfigPath(), "-n", ns, "--dir", dir, "--status-namespace", statusNS}

	// First run: everything reconciled and committed.
	op := startChild(t, bin, args...)
	op.waitFor(t, "all keys reconciled and committed", func() bool {
		op.mu.Lock()
		defer op.mu.Unlock()
		return len(op.reconciled) == n && op.head >= n && op.committed == op.head
	})
	op.checkGets(t, statusNS+"/mirror-status")

	// Mid-stream: k00..k04 are updated one after another; the operator is
	// killed once it has reconciled the first streamed update.
	streamDone := make(chan struct{})
	go func() {
		defer close(streamDone)
		for round := 1; round <= 3; round++ {
			for i := 0; i < 5; i++ {
				set(key(i), fmt.Sprintf("s%d", round))
				time.Sleep(30 * time.Millisecond) // pacing of the stream, not a wait for a result
			}
		}
	}()
	op.waitFor(t, "a streamed update reconciled", func() bool {
		op.mu.Lock()
		defer op.mu.Unlock()
		return op.reconciled[ns+"/"+key(0)] >= 2
	})
	if err := op.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	<-op.exited
	<-streamDone

	// Down: changed, deleted, deleted and recreated (new UID), created.
	set(key(5), "down")
	for _, i := range []int{6, 7} {
		if err := cms.Delete(ctx, key(i), metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	set(key(7), "again")
	set(key(n), "new")
	set(key(n+1), "last") // compaction must pass the stored RV + 1
	if _, err := cp.Compact(ctx); err != nil {
		t.Fatal(err)
	}

	// What changed while it was down, as the file knows it: keys whose
	// index entry (UID, resourceVersion) differs from the server's object,
	// or exists on one side only. And what the killed process had
	// journaled but not committed.
	server := map[string]journal.IndexEntry{}
	list, err := cms.List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, cm := range list.Items {
		server[ns+"/"+cm.Name] = journal.IndexEntry{UID: string(cm.UID), ResourceVersion: cm.ResourceVersion}
	}
	changedWhileDown := map[string]bool{}
	uncommitted := map[string]bool{}
	files, err := filepath.Glob(filepath.Join(dir, "configmaps.v1.*.db"))
	if err != nil || len(files) != 1 {
		t.Fatalf("the cache's ConfigMap files in %s: %v, %v; want one", dir, files, err)
	}
	j, err := journal.Open(files[0], &journal.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	index := map[string]bool{}
	if _, err := j.Snapshot(func(e journal.IndexEntry) error {
		index[e.Key] = true
		if s, ok := server[e.Key]; !ok || s.UID != e.UID || s.ResourceVersion != e.ResourceVersion {
			changedWhileDown[e.Key] = true
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	for k := range server {
		if !index[k] {
			changedWhileDown[k] = true
		}
	}
	committed, err := j.Consumers().Committed(consumer)
	if err != nil {
		t.Fatal(err)
	}
	for from := committed + 1; ; {
		evs, err := j.Read(from, 0)
		if err != nil {
			t.Fatal(err)
		}
		if len(evs) == 0 {
			break
		}
		for _, e := range evs {
			uncommitted[e.Key] = true
		}
		from = evs[len(evs)-1].Offset + 1
	}
	_ = j.Close()
	for _, i := range []int{5, 6, 7, n, n + 1} {
		if !changedWhileDown[ns+"/"+key(i)] {
			t.Fatalf("%s changed while down but the file's index agrees with the server", key(i))
		}
	}
	t.Logf("changed while down %v; uncommitted at the kill %v (committed %d)", changedWhileDown, uncommitted, committed)

	// Restart: it reconciles until the status mirrors the server again.
	op = startChild(t, bin, args...)
	st := kube.CoreV1().ConfigMaps(statusNS)
	var last map[string]string
	op.waitFor(t, "status mirrors the server and the commit reaches the head", func() bool {
		s, err := st.Get(ctx, "mirror-status", metav1.GetOptions{})
		if err != nil {
			return false
		}
		last = s.Data
		want := map[string]string{}
		list, err := cms.List(ctx, metav1.ListOptions{})
		if err != nil {
			return false
		}
		for _, cm := range list.Items {
			want[cm.Name] = cm.Data["value"]
		}
		if len(want) != len(s.Data) {
			return false
		}
		for k, v := range want {
			if s.Data[k] != v {
				return false
			}
		}
		op.mu.Lock()
		defer op.mu.Unlock()
		return op.committed == op.head && op.head > 0
	})
	t.Logf("status %v", last)

	expect := map[string]bool{}
	for k := range changedWhileDown {
		expect[k] = true
	}
	for k := range uncommitted {
		expect[k] = true
	}
	got := op.keys()
	var want []string
	for k := range expect {
		want = append(want, k)
	}
	sort.Strings(want)
	if strings.Join(got, " ") != strings.Join(want, " ") {
		t.Errorf("after the restart reconciled %v; want exactly %v (changed while down %v, uncommitted at the kill %v)", got, want, changedWhileDown, uncommitted)
	}
	for i := 8; i < n; i++ {
		if op.reconciled[ns+"/"+key(i)] > 0 {
			t.Errorf("untouched %s/%s reconciled after the restart", ns, key(i))
		}
	}
	op.checkGets(t, statusNS+"/mirror-status")
	_ = os.Remove(bin)
}
