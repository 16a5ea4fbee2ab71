package reconcile_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// SCENARIOS S12: relist memory with many or large objects. 300 ConfigMaps
// of about 900 KiB (about 270 MiB) are kept by a journal process in a
// memory cgroup of 128 MiB, with the default page size of 500 (every
// object fits in one page). It is never OOM-killed, through the initial
// list, a relist after a 410 with 10 updates and 10 deletes, and a SIGKILL
// in the middle of a relist and a restart; the journal holds exactly the
// events that closed each gap, and the index equals the server.
func TestLoop_LargeObjectsUnderMemoryLimit(t *testing.T) {
	if testing.Short() {
		t.Skip("creates 270 MiB of ConfigMaps")
	}
	const (
		objects = 300
		size    = 900 << 10
		limit   = 128 << 20
	)
	cg := memoryCgroup(t, limit)
	e := newEnv(t)
	createLarge(t, e, objects, size)

	// 1. Initial sync.
	c := e.startChildWith(childOptions{proxied: true, pageSize: 500, cgroup: cg})
	c.waitFor(t, "phase=Watching", fmt.Sprintf("events=%d", objects))

	// 2. cut; update 10 and delete 10; compact; heal: one relist.
	e.proxy.Cut()
	var want []string
	for i := range 10 {
		e.update(largeName(i))
		want = append(want, "MODIFIED "+largeName(i)+" relist")
	}
	for i := 10; i < 20; i++ {
		e.delete(largeName(i))
		want = append(want, "DELETED "+largeName(i)+" relist")
	}
	e.compact()
	e.proxy.Heal()
	c.waitFor(t, "phase=Watching", "gone=1", fmt.Sprintf("events=%d", objects+20))
	checkAlive(t, c, cg)
	c.kill()
	j := e.openRead()
	equal(t, "events of the relist", eventStrings(t, j, e.ns, objects+1), want)
	_ = j.Close()

	// 3. SIGKILL during a relist, then restart: no half-applied relist,
	// no event twice.
	c = e.startChildWith(childOptions{proxied: true, pageSize: 500, cgroup: cg})
	c.waitFor(t, "phase=Watching")
	e.proxy.Cut()
	want = nil
	for i := 20; i < 30; i++ {
		e.update(largeName(i))
		want = append(want, "MODIFIED "+largeName(i)+" relist")
	}
	marker := e.update(largeName(30))
	want = append(want, "MODIFIED "+largeName(30)+" relist")
	e.compact()
	e.proxy.Heal()
	c.waitFor(t, "phase=Listing")
	time.Sleep(time.Duration(rand.IntN(300)) * time.Millisecond) // a random moment of the relist
	c.kill()
	c = e.startChildWith(childOptions{proxied: true, pageSize: 500, cgroup: cg})
	c.waitFor(t, "phase=Watching", "rv="+marker.ResourceVersion)
	checkAlive(t, c, cg)
	c.kill()
	j = e.openRead()
	got := eventStrings(t, j, e.ns, objects+21)
	for i, s := range got { // the restart relist's origin is "restart"
		got[i] = strings.Replace(s, " restart", " relist", 1)
	}
	equal(t, "events of the interrupted relist and the restart", got, want)
	checkJournalConsistent(t, j)
	e.checkIndex(j)
	t.Logf("memory cgroup %s: limit %d MiB, peak usage (page cache included) %d MiB, OOM kills %d",
		cg.dir, limit>>20, cg.peak()>>20, cg.oomKills())
}

func largeName(i int) string { return fmt.Sprintf("big-%03d", i) }

// createLarge creates n ConfigMaps of about size bytes of data.
func createLarge(t *testing.T, e *env, n, size int) {
	t.Helper()
	blob := make([]byte, size)
	for i := range blob {
		blob[i] = "abcdefghijklmnopqrstuvwxyz0123456789"[rand.IntN(36)]
	}
	var wg sync.WaitGroup
	errs := make(chan error, n)
	next := make(chan int)
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: largeName(i)}, Data: map[string]string{"v": "0", "blob": string(blob)}}
				if _, err := e.kube.CoreV1().ConfigMaps(e.ns).Create(context.Background(), cm, metav1.CreateOptions{}); err != nil {
					errs <- err
				}
			}
		}()
	}
	for i := range n {
		next <- i
	}
	close(next)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatalf("create: %v", err)
	}
}

// checkAlive fails when the child died or the cgroup OOM-killed anything.
func checkAlive(t *testing.T, c *child, cg *cgroup) {
	t.Helper()
	if c.cmd.ProcessState != nil {
		t.Fatalf("the journal process exited: %v", c.cmd.ProcessState)
	}
	if n := cg.oomKills(); n > 0 {
		t.Fatalf("the memory cgroup OOM-killed %d processes", n)
	}
}

// cgroup is a memory cgroup made for one test (cgroup v1 or v2).
type cgroup struct {
	dir string
	v2  bool
}

// memoryCgroup creates a memory cgroup limited to limit bytes under the
// test process's own, or skips the test where cgroups cannot be created
// (not root, no memory controller), as the full-disk tests skip without
// tmpfs. Processes left in it are killed at cleanup.
func memoryCgroup(t *testing.T, limit int64) *cgroup {
	t.Helper()
	base, v2, err := ownMemoryCgroup()
	if err != nil {
		t.Skipf("no memory cgroup here: %v", err)
	}
	cg := &cgroup{dir: filepath.Join(base, fmt.Sprintf("wj-test-%d-%d", os.Getpid(), rand.Uint32())), v2: v2}
	if err := os.Mkdir(cg.dir, 0o755); err != nil {
		t.Skipf("cannot create a memory cgroup here: %v", err)
	}
	t.Cleanup(func() {
		for range 50 {
			if err := os.Remove(cg.dir); err == nil || errors.Is(err, os.ErrNotExist) {
				return
			}
			time.Sleep(100 * time.Millisecond) // the killed children are still leaving
		}
	})
	file, swap := "memory.limit_in_bytes", "memory.memsw.limit_in_bytes"
	if v2 {
		file, swap = "memory.max", "memory.swap.max"
	}
	if err := os.WriteFile(filepath.Join(cg.dir, file), []byte(strconv.FormatInt(limit, 10)), 0); err != nil {
		t.Skipf("cannot limit a memory cgroup here: %v", err)
	}
	_ = os.WriteFile(filepath.Join(cg.dir, swap), []byte(strconv.FormatInt(limit, 10)), 0) // no swap to escape to, where there is any
	return cg
}

// ownMemoryCgroup finds the directory of this process's memory cgroup.
func ownMemoryCgroup() (dir string, v2 bool, err error) {
	b, err := os.ReadFile("/proc/self/cgroup")
	if err != nil {
		return "", false, err
	}
	sc := bufio.NewScanner(strings.NewReader(string(b)))
	var unified string
	for sc.Scan() {
		f := strings.SplitN(sc.Text(), ":", 3)
		if len(f) != 3 {
			continue
		}
		for _, c := range strings.Split(f[1], ",") {
			if c == "memory" {
				d := filepath.Join("/sys/fs/cgroup/memory", f[2])
				if _, err := os.Stat(filepath.Join(d, "memory.limit_in_bytes")); err == nil {
					return d, false, nil
				}
			}
		}
		if f[0] == "0" {
			unified = f[2]
		}
	}
	if unified != "" {
		d := filepath.Join("/sys/fs/cgroup", unified)
		if c, err := os.ReadFile(filepath.Join(d, "cgroup.subtree_control")); err == nil && strings.Contains(string(c), "memory") {
			return d, true, nil
		}
	}
	return "", false, errors.New("no writable memory controller in /proc/self/cgroup")
}

// add moves process pid into the cgroup.
func (c *cgroup) add(pid int) error {
	return os.WriteFile(filepath.Join(c.dir, "cgroup.procs"), []byte(strconv.Itoa(pid)), 0)
}

// oomKills returns how many processes the cgroup's OOM killer killed.
func (c *cgroup) oomKills() int {
	file := "memory.oom_control"
	if c.v2 {
		file = "memory.events"
	}
	b, _ := os.ReadFile(filepath.Join(c.dir, file))
	for _, line := range strings.Split(string(b), "\n") {
		if f := strings.Fields(line); len(f) == 2 && f[0] == "oom_kill" {
			n, _ := strconv.Atoi(f[1])
			return n
		}
	}
	return 0
}

// peak returns the cgroup's peak memory usage in bytes, page cache
// included.
func (c *cgroup) peak() int64 {
	file := "memory.max_usage_in_bytes"
	if c.v2 {
		file = "memory.peak"
	}
	b, _ := os.ReadFile(filepath.Join(c.dir, file))
	n, _ := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
	return n
}
