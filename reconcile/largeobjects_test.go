package reconcile_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/watchjournal/watchjournal/internal/testing/memcgroup"
	"github.com/watchjournal/watchjournal/internal/testing/testenv"
)

// SCENARIOS S12: relist memory with many or large objects. 300 ConfigMaps
// of about 900 KiB (about 270 MiB) are kept by a journal process in a
// memory cgroup of 128 MiB, with the default page size of 500 (every
// object fits in one page). It is never OOM-killed, through the initial
// list, a relist after a 410 with 10 updates and 10 deletes, and a SIGKILL
// in the middle of a relist and a restart; the journal holds exactly the
// events that closed each gap, and the index equals the server.
//
// "Not OOM-killed" alone would also hold if the kernel kept the process
// under the limit by dropping page cache (the bbolt file's pages, which
// the cgroup is charged for) while the process's own memory grew towards
// the limit. So the test samples the cgroup's anonymous memory (cgroup v2
// memory.stat "anon", v1 "total_rss": heap, stacks, not page cache) every
// 20 ms and asserts that its maximum stays under anonBudget, a margin
// below the limit.
func TestLoop_LargeObjectsUnderMemoryLimit(t *testing.T) {
	if testing.Short() {
		t.Skip("creates 270 MiB of ConfigMaps")
	}
	const (
		objects = 300
		size    = 900 << 10
		limit   = 128 << 20
		// anonBudget is the most anonymous memory the journal process may
		// use: the limit less a margin of 32 MiB for the page cache it
		// needs to make progress (the file's pages being written).
		anonBudget = limit - 32<<20
	)
	cg := memoryCgroup(t, limit)
	anon := cg.sampleAnon(t, 20*time.Millisecond)
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
	checkAnon(t, anon, anonBudget)
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
	c.waitForRV(t, marker.ResourceVersion, "phase=Watching")
	checkAlive(t, c, cg)
	checkAnon(t, anon, anonBudget)
	c.kill()
	j = e.openRead()
	got := eventStrings(t, j, e.ns, objects+21)
	for i, s := range got { // the restart relist's origin is "restart"
		got[i] = strings.Replace(s, " restart", " relist", 1)
	}
	equal(t, "events of the interrupted relist and the restart", got, want)
	checkJournalConsistent(t, j)
	e.checkIndex(j)
	checkAnon(t, anon, anonBudget)
	t.Logf("memory cgroup %s: limit %d MiB, peak usage (page cache included) %d MiB, peak anonymous memory (sampled) %d MiB, OOM kills %d",
		cg.Dir, limit>>20, cg.Peak()>>20, anon.max()>>20, cg.OOMKills())
}

// checkAnon fails when the sampled anonymous memory of the cgroup went
// over budget bytes.
func checkAnon(t *testing.T, s *anonSampler, budget int64) {
	t.Helper()
	if m := s.max(); m > budget {
		t.Fatalf("the journal process's anonymous memory reached %d MiB (sampled every %v), over its budget of %d MiB: it stayed under the cgroup limit only by evicting page cache",
			m>>20, s.every, budget>>20)
	}
	if s.samples() == 0 {
		t.Fatalf("no sample of the cgroup's anonymous memory could be read (%s)", s.err())
	}
}

func largeName(i int) string { return fmt.Sprintf("big-%03d", i) }

// createLarge creates n ConfigMaps of about size bytes of data.
func createLarge(t *testing.T, e *env, n, size int) {
	t.Helper()
	// Each object its own random blob: one blob shared by all would
	// compress (gzip's window holds several 8 KiB objects) and a rate-
	// limited proxy would pass the stream far faster than its size says.
	blobOf := func() string {
		blob := make([]byte, size)
		for i := range blob {
			blob[i] = "abcdefghijklmnopqrstuvwxyz0123456789"[rand.IntN(36)]
		}
		return string(blob)
	}
	var wg sync.WaitGroup
	errs := make(chan error, n)
	next := make(chan int)
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: largeName(i)}, Data: map[string]string{"v": "0", "blob": blobOf()}}
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
	if n := cg.OOMKills(); n > 0 {
		t.Fatalf("the memory cgroup OOM-killed %d processes", n)
	}
}

// cgroup is a memory cgroup made for one test (cgroup v1 or v2).
type cgroup struct{ *memcgroup.Cgroup }

// memoryCgroup creates a memory cgroup limited to limit bytes under the
// test process's own. Where cgroups cannot be created (not root, no
// memory controller) the test skips, or fails under make test
// (testenv.Unavailable), as the full-disk tests do without tmpfs. Processes left in it are killed at cleanup.
func memoryCgroup(t *testing.T, limit int64) *cgroup {
	t.Helper()
	cg, err := memcgroup.New("wj-test", limit)
	if err != nil {
		testenv.Unavailable(t, "%v", err)
	}
	t.Cleanup(cg.Remove)
	return &cgroup{cg}
}

func (c *cgroup) add(pid int) error { return c.Add(pid) }

// anonSampler reads a cgroup's anonymous memory periodically and keeps
// the maximum (cgroup v1 keeps no anonymous peak; v2's memory.peak counts
// page cache too). A spike shorter than the period can be missed.
type anonSampler struct {
	every   time.Duration
	mu      sync.Mutex
	peak    int64
	n       int
	lastErr error
}

// sampleAnon starts sampling cg every period until the test ends.
func (c *cgroup) sampleAnon(t *testing.T, every time.Duration) *anonSampler {
	s := &anonSampler{every: every}
	done := make(chan struct{})
	stopped := make(chan struct{})
	go func() {
		defer close(stopped)
		tick := time.NewTicker(every)
		defer tick.Stop()
		for {
			v, err := c.Anon()
			s.mu.Lock()
			if err != nil {
				s.lastErr = err
			} else {
				s.n++
				s.peak = max(s.peak, v)
			}
			s.mu.Unlock()
			select {
			case <-done:
				return
			case <-tick.C:
			}
		}
	}()
	t.Cleanup(func() { close(done); <-stopped })
	return s
}

func (s *anonSampler) max() int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.peak
}

func (s *anonSampler) samples() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.n
}

func (s *anonSampler) err() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.lastErr
}
