// Package memcgroup makes a memory cgroup for a child process, as a pod's
// memory limit is one: cgroup v2's memory.max where this process's cgroup
// has a memory controller on the unified hierarchy, else cgroup v1's
// memory.limit_in_bytes. The kernel's OOM killer acts at the limit; swap
// is limited too where the kernel accounts it, so nothing escapes to
// swap. It needs root, or a delegated cgroup. Used by the memory-limit
// tests and by bench/cmd/headline.
package memcgroup

import (
	"bufio"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// Cgroup is a memory cgroup made by New.
type Cgroup struct {
	Dir string // its directory under /sys/fs/cgroup
	V2  bool   // cgroup v2 (else v1)
}

// Errors of New, wrapped with the cause.
var (
	ErrNoController = errors.New("memcgroup: no writable memory controller in /proc/self/cgroup")
	ErrCreate       = errors.New("memcgroup: cannot create a memory cgroup (needs root)")
	ErrLimit        = errors.New("memcgroup: cannot limit a memory cgroup")
)

// New makes a child cgroup of this process's memory cgroup, named after
// prefix, limited to limit bytes. Remove it once its processes are gone.
func New(prefix string, limit int64) (*Cgroup, error) {
	base, v2, err := own()
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrNoController, err)
	}
	c := &Cgroup{Dir: filepath.Join(base, fmt.Sprintf("%s-%d-%d", prefix, os.Getpid(), rand.Uint32())), V2: v2}
	if err := os.Mkdir(c.Dir, 0o755); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrCreate, err)
	}
	file, swap, noSwap := "memory.limit_in_bytes", "memory.memsw.limit_in_bytes", strconv.FormatInt(limit, 10)
	if v2 {
		file, swap, noSwap = "memory.max", "memory.swap.max", "0"
	}
	if err := os.WriteFile(filepath.Join(c.Dir, file), []byte(strconv.FormatInt(limit, 10)), 0); err != nil {
		c.Remove()
		return nil, fmt.Errorf("%w: %v", ErrLimit, err)
	}
	_ = os.WriteFile(filepath.Join(c.Dir, swap), []byte(noSwap), 0) // where swap is accounted
	return c, nil
}

func (c *Cgroup) String() string {
	if c.V2 {
		return "cgroup v2 memory.max"
	}
	return "cgroup v1 memory.limit_in_bytes"
}

// Add moves process pid into the cgroup.
func (c *Cgroup) Add(pid int) error {
	return os.WriteFile(filepath.Join(c.Dir, "cgroup.procs"), []byte(strconv.Itoa(pid)), 0)
}

// Remove removes the cgroup, waiting up to 5 s for its processes (killed
// ones still leaving) to be gone.
func (c *Cgroup) Remove() {
	for range 50 {
		if err := os.Remove(c.Dir); err == nil || errors.Is(err, os.ErrNotExist) {
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// OOMKills returns how many processes the cgroup's OOM killer killed.
func (c *Cgroup) OOMKills() int {
	file := "memory.oom_control"
	if c.V2 {
		file = "memory.events"
	}
	b, _ := os.ReadFile(filepath.Join(c.Dir, file))
	for _, line := range strings.Split(string(b), "\n") {
		if f := strings.Fields(line); len(f) == 2 && f[0] == "oom_kill" {
			n, _ := strconv.Atoi(f[1])
			return n
		}
	}
	return 0
}

// Peak returns the cgroup's peak usage in bytes, page cache included:
// v2's memory.peak, v1's memory.max_usage_in_bytes.
func (c *Cgroup) Peak() int64 {
	file := "memory.max_usage_in_bytes"
	if c.V2 {
		file = "memory.peak"
	}
	b, _ := os.ReadFile(filepath.Join(c.Dir, file))
	n, _ := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
	return n
}

// Anon returns the cgroup's anonymous memory in bytes, page cache
// excluded: memory.stat "anon" (v2) or "total_rss" (v1, this cgroup and
// its children).
func (c *Cgroup) Anon() (int64, error) {
	b, err := os.ReadFile(filepath.Join(c.Dir, "memory.stat"))
	if err != nil {
		return 0, err
	}
	name := "total_rss"
	if c.V2 {
		name = "anon"
	}
	for _, line := range strings.Split(string(b), "\n") {
		if f := strings.Fields(line); len(f) == 2 && f[0] == name {
			return strconv.ParseInt(f[1], 10, 64)
		}
	}
	return 0, fmt.Errorf("no %q in %s/memory.stat", name, c.Dir)
}

// own finds the directory of this process's memory cgroup.
func own() (dir string, v2 bool, err error) {
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
	return "", false, errors.New("no memory controller")
}
