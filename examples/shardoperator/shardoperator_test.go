package main

// Three shardoperator processes in one group against the real apiserver,
// with the ShardedListAndWatch gate off and on: 3,000 labeled ConfigMaps,
// each reconciled by the replica that holds it, which creates its Secret;
// then one replica is killed (SIGKILL), one added, one removed (SIGTERM).
// After each change every ConfigMap whose holder changed is reconciled by
// its new holder; at the end each is held by one live replica, which
// reconciled it, none was deleted or orphaned, and no reconcile found a
// ConfigMap missing because it moved. The stopped replicas' ConfigMap
// files (ShardOptions.Owners) held only their ranges.

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/watchjournal/watchjournal/internal/hashrange"
	"github.com/watchjournal/watchjournal/internal/testing/controlplane"
	"github.com/watchjournal/watchjournal/internal/testing/mainbin"
	"github.com/watchjournal/watchjournal/journal"
	"github.com/watchjournal/watchjournal/shards"
)

// bin is the operator, built once for the package's tests (TestMain).
var bin string

func TestMain(m *testing.M) { os.Exit(mainbin.RunBuilt(m, "shardoperator", &bin)) }

// replica is one operator process and the lines it printed, by kind
// ("reconcile", "not-held", "gone") and key.
type replica struct {
	name   string
	dir    string // the cache's directory
	cmd    *exec.Cmd
	exited chan struct{}

	mu    sync.Mutex
	lines map[string]map[string]int
}

func startReplica(t *testing.T, kubeconfig, ns, name string) *replica {
	t.Helper()
	dir := t.TempDir()
	cmd := exec.Command(bin, "--kubeconfig", kubeconfig, "--dir", dir, "--shard-member", name,
		"--shard-namespace", ns, "--lease-duration", "3s")
	r := &replica{name: name, dir: dir, cmd: cmd, exited: make(chan struct{}), lines: map[string]map[string]int{}}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		defer close(r.exited)
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			kind, key, ok := strings.Cut(sc.Text(), " ")
			if !ok {
				continue
			}
			r.mu.Lock()
			if r.lines[kind] == nil {
				r.lines[kind] = map[string]int{}
			}
			r.lines[kind][key]++
			r.mu.Unlock()
		}
		_ = cmd.Wait()
	}()
	t.Cleanup(func() { _ = cmd.Process.Kill(); <-r.exited })
	return r
}

// count returns how many lines of kind the replica printed for key.
func (r *replica) count(kind, key string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.lines[kind][key]
}

// all returns the keys of kind's lines and their counts.
func (r *replica) all(kind string) map[string]int {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := map[string]int{}
	for k, n := range r.lines[kind] {
		out[k] = n
	}
	return out
}

// stop sends sig and waits for the process to exit.
func (r *replica) stop(t *testing.T, sig syscall.Signal) {
	t.Helper()
	if err := r.cmd.Process.Signal(sig); err != nil {
		t.Fatal(err)
	}
	select {
	case <-r.exited:
	case <-time.After(time.Minute):
		t.Fatalf("%s did not exit after %v", r.name, sig)
	}
}

// group is the test's view of the replicas and the ConfigMaps.
type group struct {
	t    *testing.T
	kube kubernetes.Interface
	ns   string
	live []*replica
}

// holders returns, for each labeled ConfigMap (key "ns/name"), the live
// replicas whose published range holds its UID, and whether the live
// replicas' published ranges split the whole hash space between them,
// each holding a part.
func (g *group) holders() (map[string][]*replica, bool) {
	ctx := context.Background()
	leases, err := g.kube.CoordinationV1().Leases(g.ns).List(ctx, metav1.ListOptions{LabelSelector: shards.LabelGroup + "=shardoperator"})
	if err != nil {
		g.t.Fatal(err)
	}
	ranges := map[string]hashrange.Set{}
	for _, l := range leases.Items {
		if s, err := hashrange.Parse(l.Annotations[shards.AnnotationSelector]); err == nil {
			ranges[l.Annotations[shards.AnnotationMember]] = s
		}
	}
	var union hashrange.Set
	split := true
	for _, r := range g.live {
		s := ranges[r.name]
		if s.Empty() || !union.Intersect(s).Empty() {
			split = false
		}
		union = union.Union(s)
	}
	split = split && union.Equal(hashrange.Full())
	cms, err := g.kube.CoreV1().ConfigMaps(g.ns).List(ctx, metav1.ListOptions{LabelSelector: label + "=true"})
	if err != nil {
		g.t.Fatal(err)
	}
	out := map[string][]*replica{}
	for _, cm := range cms.Items {
		k := cm.Namespace + "/" + cm.Name
		out[k] = nil
		for _, r := range g.live {
			if ranges[r.name].ContainsUID(string(cm.UID)) {
				out[k] = append(out[k], r)
			}
		}
	}
	return out, split
}

// wait polls cond every 200 ms for up to two minutes, failing with the
// last state cond described.
func (g *group) wait(why string, cond func() (bool, string)) {
	g.t.Helper()
	deadline := time.Now().Add(2 * time.Minute)
	for {
		ok, state := cond()
		if ok {
			return
		}
		if time.Now().After(deadline) {
			g.t.Fatalf("%s: timed out; last state: %s", why, state)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// change runs do, which returns the live replicas after it, and waits
// until their ranges split the space and every ConfigMap whose holder
// changed has been reconciled by its new holder since.
func (g *group) change(why string, do func() []*replica) {
	g.t.Helper()
	before, _ := g.holders()
	counts := map[*replica]map[string]int{}
	for _, r := range g.live {
		counts[r] = r.all("reconcile")
	}
	start := time.Now()
	g.live = do()
	moved := 0
	g.wait(why, func() (bool, string) {
		h, split := g.holders()
		if !split {
			return false, "the live replicas' ranges do not split the space"
		}
		moved = 0
		for k, rs := range h {
			if len(rs) != 1 {
				return false, fmt.Sprintf("%s held by %d replicas", k, len(rs))
			}
			if len(before[k]) == 1 && before[k][0] == rs[0] {
				continue
			}
			moved++
			if rs[0].count("reconcile", k) <= counts[rs[0]][k] {
				return false, fmt.Sprintf("%s moved to %s, not reconciled there yet", k, rs[0].name)
			}
		}
		return true, ""
	})
	g.t.Logf("%s: %d ConfigMaps moved, each reconciled by its new holder within %v", why, moved, time.Since(start).Round(100*time.Millisecond))
}

func TestShardOperator_KillAddRemove(t *testing.T) {
	for _, gate := range []bool{false, true} {
		t.Run(fmt.Sprintf("ShardedListAndWatch=%v", gate), func(t *testing.T) {
			var opts controlplane.Options
			if gate {
				opts.ExtraAPIServerArgs = []string{"--feature-gates=ShardedListAndWatch=true"}
			}
			killAddRemove(t, opts)
		})
	}
}

func killAddRemove(t *testing.T, opts controlplane.Options) {
	const owners = 3000
	cp := controlplane.StartT(t, opts)
	ctx := context.Background()
	ns := "shards"
	kube := cp.CreateNamespaceT(t, ns)
	g := &group{t: t, kube: kube, ns: ns}
	start := func(name string) *replica { return startReplica(t, cp.KubeconfigPath(), ns, name) }
	r0, r1, r2 := start("r0"), start("r1"), start("r2")
	g.live = []*replica{r0, r1, r2}
	g.wait("three replicas split the space", func() (bool, string) {
		_, split := g.holders()
		return split, "not split"
	})

	// The ConfigMaps, made while the group is settled: each is reconciled
	// by its holder alone.
	began := time.Now()
	var next atomic.Int64
	var wg sync.WaitGroup
	var failed atomic.Value
	for range 16 {
		wg.Go(func() {
			for i := int(next.Add(1)) - 1; i < owners; i = int(next.Add(1)) - 1 {
				_, err := kube.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{
					Name: fmt.Sprintf("owner-%04d", i), Namespace: ns, Labels: map[string]string{label: "true"}}}, metav1.CreateOptions{})
				if err != nil {
					failed.Store(err)
					return
				}
			}
		})
	}
	wg.Wait()
	if err, ok := failed.Load().(error); ok {
		t.Fatal(err)
	}
	g.wait("every ConfigMap reconciled by its holder alone", func() (bool, string) {
		h, _ := g.holders()
		if len(h) != owners {
			return false, fmt.Sprintf("%d ConfigMaps", len(h))
		}
		for k, rs := range h {
			if len(rs) != 1 || rs[0].count("reconcile", k) == 0 {
				return false, fmt.Sprintf("%s: held by %d replicas, not reconciled by its holder", k, len(rs))
			}
			for _, r := range g.live {
				if r != rs[0] && r.count("reconcile", k)+r.count("not-held", k) > 0 {
					// Fatal: nothing moved, so only a handler given a key
					// outside its range queues it here.
					t.Fatalf("%s requested on %s, held by %s, while the group was settled", k, r.name, rs[0].name)
				}
			}
		}
		return true, ""
	})
	t.Logf("%d ConfigMaps created and each reconciled by its holder in %v", owners, time.Since(began).Round(100*time.Millisecond))

	g.change("r1 killed (SIGKILL)", func() []*replica { r1.stop(t, syscall.SIGKILL); return []*replica{r0, r2} })
	var r3 *replica
	g.change("r3 added", func() []*replica { r3 = start("r3"); return []*replica{r0, r2, r3} })
	g.change("r2 removed (SIGTERM)", func() []*replica { r2.stop(t, syscall.SIGTERM); return []*replica{r0, r3} })

	// The end: every ConfigMap exists, held by one live replica that
	// reconciled it, and owns its Secret.
	h, _ := g.holders()
	if len(h) != owners {
		t.Errorf("%d ConfigMaps; want %d (none deleted)", len(h), owners)
	}
	for k, rs := range h {
		if len(rs) != 1 || rs[0].count("reconcile", k) == 0 {
			t.Errorf("%s: held by %d live replicas, not reconciled by its holder", k, len(rs))
		}
	}
	secrets, err := kube.CoreV1().Secrets(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	owned := 0
	for _, s := range secrets.Items {
		if ref := metav1.GetControllerOf(&s); ref != nil && ref.Kind == "ConfigMap" && strings.HasSuffix(s.Name, "-secret") {
			owned++
		}
	}
	if owned != owners {
		t.Errorf("%d Secrets owned by their ConfigMap; want %d (none orphaned)", owned, owners)
	}
	notHeld := 0
	for _, r := range []*replica{r0, r1, r2, r3} {
		if gone := r.all("gone"); len(gone) > 0 {
			t.Errorf("%s reconciled %d ConfigMaps as gone (none was deleted): %v", r.name, len(gone), gone)
		}
		notHeld += len(r.all("not-held"))
	}
	t.Logf("requests skipped as not held (queued before their key moved): %d", notHeld)

	// The replicas that exited left ConfigMap files of their ranges alone.
	for _, r := range []*replica{r1, r2} {
		sel, keys, err := configMapFile(r.dir)
		if err != nil {
			t.Fatalf("%s: %v", r.name, err)
		}
		if sel.Equal(hashrange.Full()) || len(keys) == 0 || len(keys) >= owners {
			t.Errorf("%s's ConfigMap file records %.1f%% of the space and holds %d keys; want a share, and some of the %d ConfigMaps", r.name, 100*sel.Share(), len(keys), owners)
		}
		for _, e := range keys {
			if !sel.ContainsUID(e.UID) {
				t.Errorf("%s's ConfigMap file holds %s, outside the range it records", r.name, e.Key)
				break
			}
		}
	}
}

// configMapFile opens the ranged ConfigMap file in dir, the cache's
// directory of a replica that exited, and returns the range it records
// and its index.
func configMapFile(dir string) (hashrange.Set, []journal.IndexEntry, error) {
	paths, err := filepath.Glob(filepath.Join(dir, "configmaps*.shard-shardoperator.db"))
	if err != nil || len(paths) != 1 {
		return nil, nil, fmt.Errorf("ranged ConfigMap files in %s: %v, %v; want one", dir, paths, err)
	}
	j, err := journal.Open(paths[0], &journal.Options{ReadOnly: true})
	if err != nil {
		return nil, nil, err
	}
	defer j.Close()
	rec, _, err := j.Resource()
	if err != nil {
		return nil, nil, err
	}
	sel, err := hashrange.Selected(rec.ShardSelector)
	if err != nil {
		return nil, nil, err
	}
	var keys []journal.IndexEntry
	for after := ""; ; {
		page, err := j.ScanIndex(after, 1000)
		if err != nil {
			return nil, nil, err
		}
		if len(page) == 0 {
			return sel, keys, nil
		}
		keys = append(keys, page...)
		after = page[len(page)-1].Key
	}
}
