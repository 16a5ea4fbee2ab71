//go:build linux

package main

// Shard groups end to end: replicas are separate processes
// (this test binary re-run as journalctl), against a real kube-apiserver
// with the ShardedListAndWatch gate on (server mode) and off (client
// mode).

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/watchjournal/watchjournal/internal/testing/controlplane"
	"github.com/watchjournal/watchjournal/journal"
	"github.com/watchjournal/watchjournal/journal/inspect"
	"github.com/watchjournal/watchjournal/reconcile"
)

// shardChildEnv makes this test binary run journalctl's main (TestMain).
const shardChildEnv = "WATCHJOURNAL_TEST_JOURNALCTL"

func TestMain(m *testing.M) {
	if os.Getenv(shardChildEnv) == "1" {
		main()
	}
	os.Exit(controlplane.RunWithSpare(m))
}

const (
	shardObjects = 3000
	shardLease   = 3 * time.Second
	shardRenew   = time.Second
)

func TestWatchShardGroup(t *testing.T) {
	for _, tc := range []struct {
		name string
		gate bool
		mode reconcile.ShardMode
	}{
		{"gate on: the apiserver filters", true, reconcile.ShardServer},
		{"gate off: the replicas filter", false, reconcile.ShardClient},
	} {
		t.Run(tc.name, func(t *testing.T) { testShardGroup(t, tc.gate, tc.mode) })
	}
}

// replica is one journalctl watch --shard-group process.
type replica struct {
	name, db, logPath string
	cmd               *exec.Cmd
	done              chan struct{}
}

func startReplica(t *testing.T, dir, kubeconfig, name string) *replica {
	t.Helper()
	r := &replica{name: name, db: filepath.Join(dir, name+".db"), logPath: filepath.Join(dir, name+".log"), done: make(chan struct{})}
	logf, err := os.OpenFile(r.logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	r.cmd = exec.Command(os.Args[0], "watch", "configmaps", "-n", "shard", "--db", r.db, "--kubeconfig", kubeconfig,
		"--shard-group", "g", "--shard-member", name, "--shard-lease-duration", shardLease.String(),
		"--shard-renew-interval", shardRenew.String(), "--verify-interval", "0")
	r.cmd.Env = append(os.Environ(), shardChildEnv+"=1")
	r.cmd.Stdout, r.cmd.Stderr = logf, logf
	r.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := r.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { _ = r.cmd.Wait(); _ = logf.Close(); close(r.done) }()
	t.Cleanup(func() { r.kill(); <-r.done })
	return r
}

func (r *replica) kill() { _ = r.cmd.Process.Signal(syscall.SIGKILL) }

func (r *replica) tail() string {
	b, _ := os.ReadFile(r.logPath)
	lines := strings.Split(string(b), "\n")
	return strings.Join(lines[max(0, len(lines)-15):], "\n")
}

// index reads the replica's index through its socket.
func (r *replica) index(ctx context.Context) (map[string]string, error) {
	s := inspect.NewClient(inspect.SocketPath(r.db))
	defer s.Close()
	out := map[string]string{}
	after := ""
	for {
		es, err := s.ScanIndex(ctx, after, 5000)
		if err != nil {
			return nil, err
		}
		for _, e := range es {
			out[e.Key] = e.UID
		}
		if len(es) < 5000 {
			return out, nil
		}
		after = es[len(es)-1].Key
	}
}

func (r *replica) status(ctx context.Context) (*inspect.Status, error) {
	s := inspect.NewClient(inspect.SocketPath(r.db))
	defer s.Close()
	return s.Status(ctx)
}

// events reads the replica's journal from its file, once the replica has
// stopped.
func (r *replica) events(t *testing.T) []journal.Event {
	t.Helper()
	j, err := journal.Open(r.db, &journal.Options{ReadOnly: true})
	if err != nil {
		t.Fatalf("%s: %v", r.name, err)
	}
	defer j.Close()
	var out []journal.Event
	from := uint64(1)
	for {
		evs, err := j.Read(from, 5000)
		if err != nil {
			t.Fatalf("%s: read: %v", r.name, err)
		}
		if len(evs) == 0 {
			return out
		}
		out = append(out, evs...)
		from = evs[len(evs)-1].Offset + 1
	}
}

// covered waits until the replicas' indexes are disjoint and their union
// is exactly server (key → UID), each replica synced in mode, and returns
// how long it took.
func covered(t *testing.T, rs []*replica, server map[string]string, mode reconcile.ShardMode, within time.Duration) time.Duration {
	t.Helper()
	start := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), within)
	defer cancel()
	last := ""
	for {
		last = func() string {
			union := map[string]string{}
			total := 0
			for _, r := range rs {
				st, err := r.status(ctx)
				if err != nil {
					return fmt.Sprintf("%s: status: %v", r.name, err)
				}
				if !st.Synced || reconcile.ShardMode(st.ShardMode) != mode {
					return fmt.Sprintf("%s: phase %s synced %v mode %q", r.name, st.Phase, st.Synced, st.ShardMode)
				}
				idx, err := r.index(ctx)
				if err != nil {
					return fmt.Sprintf("%s: index: %v", r.name, err)
				}
				total += len(idx)
				for k, u := range idx {
					union[k] = u
				}
			}
			missing, extra := 0, 0
			for k, u := range server {
				if union[k] != u {
					missing++
				}
			}
			for k := range union {
				if _, ok := server[k]; !ok {
					extra++
				}
			}
			if missing > 0 || extra > 0 || total != len(server) {
				return fmt.Sprintf("%d keys held (%d on the server): %d missing, %d not on the server, %d held twice",
					total, len(server), missing, extra, total-len(union))
			}
			return ""
		}()
		if last == "" {
			return time.Since(start)
		}
		select {
		case <-ctx.Done():
			for _, r := range rs {
				t.Logf("%s log:\n%s", r.name, r.tail())
			}
			t.Fatalf("replicas %v did not cover the server within %v: %s", names(rs), within, last)
		case <-time.After(250 * time.Millisecond):
		}
	}
}

func names(rs []*replica) []string {
	var out []string
	for _, r := range rs {
		out = append(out, r.name)
	}
	return out
}

// noFalseDeletes fails the test for any DELETED in evs at offsets from
// through to (0: no end) of a key that is on the server with the same UID
// and is not tagged as moved, or of one deleted there that is not tagged
// gone; it returns how many DELETED and ADDED events there say moved.
func noFalseDeletes(t *testing.T, name string, evs []journal.Event, server map[string]string, from, to uint64) (deletedMoved, addedMoved int) {
	t.Helper()
	for _, e := range evs {
		if e.Offset < from || to != 0 && e.Offset > to {
			continue
		}
		switch {
		case e.Type == journal.Deleted && movedReason(e):
			deletedMoved++
		case e.Type == journal.Deleted && server[e.Key] == e.UID:
			t.Errorf("%s: offset %d: DELETED %s (uid %s, origin %s, reason %q) while it exists on the server",
				name, e.Offset, e.Key, e.UID, e.Origin, e.Reason)
		case e.Type == journal.Deleted && e.Reason != journal.ReasonGone:
			t.Errorf("%s: offset %d: DELETED %s (uid %s, origin %s) of an object deleted on the server: reason %q; want gone",
				name, e.Offset, e.Key, e.UID, e.Origin, e.Reason)
		case e.Type == journal.Added && movedReason(e):
			addedMoved++
		}
	}
	return deletedMoved, addedMoved
}

func head(t *testing.T, r *replica) uint64 {
	s := inspect.NewClient(inspect.SocketPath(r.db))
	defer s.Close()
	h, err := s.Head(context.Background())
	if err != nil {
		t.Fatalf("%s: head: %v", r.name, err)
	}
	return h
}

func testShardGroup(t *testing.T, gate bool, mode reconcile.ShardMode) {
	opts := controlplane.Options{}
	if gate {
		opts.ExtraAPIServerArgs = []string{"--feature-gates=ShardedListAndWatch=true"}
	}
	cp := controlplane.StartT(t, opts)
	cfg := cp.RESTConfig()
	cfg.QPS, cfg.Burst = -1, 0
	cs := kubernetes.NewForConfigOrDie(cfg)
	ctx := context.Background()
	if _, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "shard"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	began := time.Now()
	server := map[string]string{}
	var mu sync.Mutex
	var wg sync.WaitGroup
	work := make(chan int)
	errs := make(chan error, 16)
	for range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range work {
				cm, err := cs.CoreV1().ConfigMaps("shard").Create(ctx, &corev1.ConfigMap{
					ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("cm-%04d", i)}, Data: map[string]string{"i": fmt.Sprint(i)}}, metav1.CreateOptions{})
				if err != nil {
					errs <- err
					return
				}
				mu.Lock()
				server["shard/"+cm.Name] = string(cm.UID)
				mu.Unlock()
			}
		}()
	}
	for i := range shardObjects {
		work <- i
	}
	close(work)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	t.Logf("created %d ConfigMaps in %v", shardObjects, time.Since(began).Round(time.Millisecond))

	dir := t.TempDir()
	kc := cp.KubeconfigPath()
	rs := []*replica{startReplica(t, dir, kc, "r0"), startReplica(t, dir, kc, "r1"), startReplica(t, dir, kc, "r2")}
	took := covered(t, rs, server, mode, 60*time.Second)
	t.Logf("3 replicas cover the %d objects, disjoint, %s mode, %v after start", len(server), mode, took.Round(time.Millisecond))
	for _, r := range rs {
		idx, _ := r.index(ctx)
		t.Logf("%s holds %d objects", r.name, len(idx))
	}
	var stats strings.Builder
	if code := run(ctx, []string{"stats", "--db", rs[0].db}, &stats, &stats); code != 0 || !regexp.MustCompile(`(?m)^shard mode +`+string(mode)+` `).MatchString(stats.String()) {
		t.Errorf("journalctl stats = %d:\n%s\nwant a line shard mode %s", code, stats.String(), mode)
	}
	// Live changes go through the watches: each lands in one replica.
	deleted := map[string]string{}
	churn(t, cs, server, deleted, 3000, 0, 20)
	covered(t, rs, server, mode, 30*time.Second)

	// kill -9 r1: r0 and r2 take its range.
	heads := map[string]uint64{"r0": head(t, rs[0]) + 1, "r2": head(t, rs[2]) + 1}
	rs[1].kill()
	<-rs[1].done
	killed := time.Now()
	churn(t, cs, server, deleted, 3020, 20, 20) // while r1 is dead
	took = covered(t, []*replica{rs[0], rs[2]}, server, mode, 60*time.Second)
	t.Logf("r0 and r2 cover r1's range %v after its kill -9 (Lease %v, renew %v)", took.Round(time.Millisecond), shardLease, shardRenew)
	if bound := shardLease + shardRenew + 20*time.Second; time.Since(killed) > bound {
		t.Errorf("takeover took %v; want within %v (Lease + renew + one list)", time.Since(killed), bound)
	}
	afterKill := map[string]uint64{"r0": head(t, rs[0]), "r2": head(t, rs[2])}

	// Restart r1 on its file: the ranges go back, moved, no false delete.
	rs[1] = startReplica(t, dir, kc, "r1")
	took = covered(t, rs, server, mode, 60*time.Second)
	t.Logf("after r1's restart the 3 replicas cover the objects again, disjoint, %v after it started", took.Round(time.Millisecond))
	afterRestart := map[string]uint64{"r0": head(t, rs[0]), "r1": head(t, rs[1]), "r2": head(t, rs[2])}

	// A new member with an empty file joins: at every moment the union
	// of the journals holds every key (the others drop a key only after
	// r3 has listed it), read losers first, so that a key dropped after
	// its loser was read is in the snapshot, and one dropped before is in
	// r3's, read last.
	r3 := startReplica(t, dir, kc, "r3")
	gap := noGap(t, append(slices.Clone(rs), r3), server, "r3 joins")
	took = covered(t, append(slices.Clone(rs), r3), server, mode, 60*time.Second)
	gap()
	t.Logf("r3 joined: 4 replicas cover the objects, disjoint, %v after it started, with no gap", took.Round(time.Millisecond))
	idx, _ := r3.index(ctx)
	held := len(idx)
	afterJoin := map[string]uint64{"r0": head(t, rs[0]), "r1": head(t, rs[1]), "r2": head(t, rs[2]), "r3": head(t, r3)}

	// r2 stops cleanly (SIGTERM): it journals until the others hold its
	// range, so again no key is in no journal.
	idx, _ = rs[2].index(ctx)
	leaverHeld := len(idx)
	gap = noGap(t, []*replica{rs[2], rs[0], rs[1], r3}, server, "r2 leaves")
	left := time.Now()
	_ = rs[2].cmd.Process.Signal(syscall.SIGTERM)
	<-rs[2].done
	gap()
	t.Logf("r2 left cleanly %v after SIGTERM; r0, r1, r3 hold its range, with no gap", time.Since(left).Round(time.Millisecond))
	covered(t, []*replica{rs[0], rs[1], r3}, server, mode, 30*time.Second)

	afterLeave := map[string]uint64{"r0": head(t, rs[0]), "r1": head(t, rs[1]), "r3": head(t, r3)}

	// Stop them all at once (SIGTERM), then read the files: every DELETED
	// of a key that exists says moved, and the moves are where they belong.
	all := append(slices.Clone(rs), r3)
	for _, r := range all {
		_ = r.cmd.Process.Signal(syscall.SIGTERM)
	}
	evs := map[string][]journal.Event{}
	for _, r := range all {
		<-r.done
		evs[r.name] = r.events(t)
	}
	in, out, join := 0, 0, 0
	for _, n := range []string{"r0", "r2"} {
		_, i := noFalseDeletes(t, n, evs[n], server, heads[n], afterKill[n])
		in += i
		o, _ := noFalseDeletes(t, n, evs[n], server, afterKill[n]+1, afterRestart[n])
		out += o
	}
	noFalseDeletes(t, "r1", evs["r1"], server, 1, afterRestart["r1"])
	checkMovedIn(t, in)
	checkMovedOut(t, out)
	for _, n := range []string{"r0", "r1", "r2"} {
		o, _ := noFalseDeletes(t, n, evs[n], server, afterRestart[n]+1, afterJoin[n])
		join += o
	}
	_, r3in := noFalseDeletes(t, "r3", evs["r3"], server, 1, afterJoin["r3"])
	checkJoin(t, held, r3in, join)
	leaveIn := 0
	for _, n := range []string{"r0", "r1", "r3"} {
		_, i := noFalseDeletes(t, n, evs[n], server, afterJoin[n]+1, afterLeave[n])
		leaveIn += i
		noFalseDeletes(t, n, evs[n], server, afterLeave[n]+1, 0)
	}
	noFalseDeletes(t, "r2", evs["r2"], server, afterJoin["r2"]+1, 0)
	for _, n := range []string{"r0", "r2"} {
		noFalseDeletes(t, n, evs[n], server, 1, heads[n]-1) // the first phase
	}
	// Every object deleted on the server is journaled gone by a member.
	for _, n := range []string{"r0", "r1", "r2", "r3"} {
		for _, e := range evs[n] {
			if e.Type == journal.Deleted && e.Reason == journal.ReasonGone && deleted[e.Key] == e.UID {
				delete(deleted, e.Key)
			}
		}
	}
	if len(deleted) > 0 {
		t.Errorf("%d objects deleted on the server were journaled gone by no member: %v", len(deleted), deleted)
	}
	if leaveIn != leaverHeld {
		t.Errorf("r0, r1, r3 journaled %d ADDED moved as r2 left; want the %d keys r2 held", leaveIn, leaverHeld)
	}
}

// noGap checks, until the returned function is called, that every key of
// server is in the index of one of rs at every moment, reading them in
// order (those that lose keys first: a key dropped after its loser was
// read is in the snapshot, one dropped before is in a gainer's, read
// later); a replica whose socket does not answer counts as empty. The
// returned function stops the check and fails the test for a gap.
func noGap(t *testing.T, rs []*replica, server map[string]string, while string) func() {
	stop := make(chan struct{})
	gapErr := make(chan string, 1)
	go func() {
		defer close(gapErr)
		for {
			select {
			case <-stop:
				return
			default:
			}
			union := map[string]bool{}
			for _, r := range rs {
				idx, err := r.index(context.Background())
				if err != nil {
					continue
				}
				for k := range idx {
					union[k] = true
				}
			}
			for k := range server {
				if !union[k] {
					gapErr <- fmt.Sprintf("%s is in no replica's journal while %s", k, while)
					return
				}
			}
		}
	}()
	return func() {
		t.Helper()
		close(stop)
		if msg, ok := <-gapErr; ok {
			t.Error(msg)
		}
	}
}

// churn creates n ConfigMaps cm-<from>… and deletes n from cm-<del>… on,
// and records it in server and deleted (key → UID).
func churn(t *testing.T, cs kubernetes.Interface, server, deleted map[string]string, from, del, n int) {
	t.Helper()
	ctx := context.Background()
	for i := range n {
		cm, err := cs.CoreV1().ConfigMaps("shard").Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("cm-%04d", from+i)}}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		server["shard/"+cm.Name] = string(cm.UID)
		name := fmt.Sprintf("cm-%04d", del+i)
		deleted["shard/"+name] = server["shard/"+name]
		if err := cs.CoreV1().ConfigMaps("shard").Delete(ctx, name, metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		delete(server, "shard/"+name)
	}
}
