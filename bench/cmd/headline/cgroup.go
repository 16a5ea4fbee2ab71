package main

// A memory cgroup for one operator process: cgroup v2's memory.max where
// this process's cgroup has a memory controller on the unified hierarchy,
// else cgroup v1's memory.limit_in_bytes. Either way the kernel's OOM
// killer acts at the limit, as it does for a pod; swap is limited to the
// same value where the kernel accounts it, so nothing escapes to swap.

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

type cgroup struct {
	dir string
	v2  bool
}

// newCgroup makes a child cgroup of this process's memory cgroup limited
// to limit bytes. It needs root (or a delegated cgroup).
func newCgroup(limit int64) (*cgroup, error) {
	base, v2, err := ownMemoryCgroup()
	if err != nil {
		return nil, err
	}
	cg := &cgroup{dir: filepath.Join(base, fmt.Sprintf("headline-%d-%d", os.Getpid(), rand.Uint32())), v2: v2}
	if err := os.Mkdir(cg.dir, 0o755); err != nil {
		return nil, fmt.Errorf("creating a memory cgroup (needs root): %w", err)
	}
	file, swap := "memory.limit_in_bytes", "memory.memsw.limit_in_bytes"
	if v2 {
		file, swap = "memory.max", "memory.swap.max"
	}
	if err := os.WriteFile(filepath.Join(cg.dir, file), []byte(strconv.FormatInt(limit, 10)), 0); err != nil {
		cg.remove()
		return nil, fmt.Errorf("limiting a memory cgroup: %w", err)
	}
	if v2 {
		_ = os.WriteFile(filepath.Join(cg.dir, swap), []byte("0"), 0)
	} else {
		_ = os.WriteFile(filepath.Join(cg.dir, swap), []byte(strconv.FormatInt(limit, 10)), 0) // where swap is accounted
	}
	return cg, nil
}

func (c *cgroup) String() string {
	if c.v2 {
		return "cgroup v2 memory.max"
	}
	return "cgroup v1 memory.limit_in_bytes"
}

// add moves process pid into the cgroup.
func (c *cgroup) add(pid int) error {
	return os.WriteFile(filepath.Join(c.dir, "cgroup.procs"), []byte(strconv.Itoa(pid)), 0)
}

// remove removes the cgroup once its processes have left it.
func (c *cgroup) remove() {
	for range 50 {
		if err := os.Remove(c.dir); err == nil || errors.Is(err, os.ErrNotExist) {
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
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

// peak returns the cgroup's peak usage (page cache included): v2's
// memory.peak, v1's memory.max_usage_in_bytes.
func (c *cgroup) peak() int64 {
	file := "memory.max_usage_in_bytes"
	if c.v2 {
		file = "memory.peak"
	}
	b, _ := os.ReadFile(filepath.Join(c.dir, file))
	v, _ := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
	return v
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
