package main

// The parent: the control plane, the objects, one child per case.

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"k8s.io/client-go/kubernetes"

	"github.com/watchjournal/watchjournal/internal/testing/controlplane"
	"github.com/watchjournal/watchjournal/internal/testing/memcgroup"
)

// result is one case's outcome. Times are seconds from the moment the
// process was let go (in its cgroup); 0 means not reached.
type result struct {
	Case  string `json:"case"`
	Limit int64  `json:"limit"` // bytes; 0: none
	How   string `json:"how"`   // how the limit was applied

	Killed   bool    `json:"killed"`   // by the kernel's OOM killer (SIGKILL)
	KilledAt float64 `json:"killedAt"` // seconds
	OOMKills int     `json:"oomKills"` // the cgroup's count
	Err      string  `json:"err,omitempty"`

	Ready float64 `json:"ready"` // Exact: its WaitForSync returned
	First float64 `json:"first"` // the first reconcile
	All   float64 `json:"all"`   // every object reconciled once
	Idle  float64 `json:"idle"`  // Exact: every event in the file committed

	Distinct   int64 `json:"distinct"`   // objects reconciled at least once
	Reconciles int64 `json:"reconciles"` // reconciles run

	PeakRSS    int64 `json:"peakRSS"`    // the largest VmRSS sampled
	PeakAnon   int64 `json:"peakAnon"`   // the largest RssAnon sampled
	PeakCgroup int64 `json:"peakCgroup"` // the cgroup's own peak (page cache included)
	Disk       int64 `json:"disk"`       // bytes in the cache's directory after the process

	Samples []sample `json:"samples"`
}

// sample is one reading of the child's resident set.
type sample struct {
	T    float64 `json:"t"` // seconds
	RSS  int64   `json:"rss"`
	Anon int64   `json:"anon"`
}

type results struct {
	Kind      string    `json:"kind"`
	N         int       `json:"n"`
	Size      int       `json:"size"`
	Limit     int64     `json:"limit"`
	Populated float64   `json:"populatedSeconds"`
	Date      time.Time `json:"date"`
	Machine   string    `json:"machine"`
	Command   string    `json:"command"`
	Cases     []*result `json:"cases"`
}

func run(ctx context.Context, o options) error {
	dir, err := filepath.Abs(o.dir)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	logf("starting a control plane in %s (watch cache on)", dir)
	cp, err := controlplane.Start(ctx, filepath.Join(dir, "controlplane"), controlplane.Options{
		WatchCache:            true,
		APIServerReadyTimeout: 20 * time.Minute,
		KeepData:              true, // the objects are made once: populate keeps those that exist
		Logf:                  func(f string, a ...any) { logf(f, a...) },
	})
	if err != nil {
		return err
	}
	defer cp.Stop()
	cfg := cp.RESTConfig()
	cfg.QPS, cfg.Burst = -1, 0 // no client-side limit for the writers
	cfg.ContentType = "application/vnd.kubernetes.protobuf"
	kube, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return err
	}
	// A marker records what an earlier run on this directory created, so
	// that a rerun does not ask the apiserver a million times.
	marker := filepath.Join(dir, fmt.Sprintf("created-%s-%d-%d", o.kind, o.n, o.objectLen))
	var took time.Duration
	if b, err := os.ReadFile(marker); err == nil {
		took, _ = time.ParseDuration(strings.TrimSpace(string(b)))
		logf("the %d %s exist (%s); created in %v", o.n, o.kind, marker, took)
	} else {
		logf("creating %d %s of %d bytes in %d namespaces with %d writers", o.n, o.kind, o.objectLen, namespaces, o.workers)
		if took, err = populate(ctx, kube, o.kind, o.n, o.objectLen, o.workers); err != nil {
			return err
		}
		logf("created %d in %v", o.n, took.Round(time.Second))
		if err := os.WriteFile(marker, []byte(took.String()), 0o644); err != nil {
			return err
		}
	}
	res := &results{Kind: o.kind, N: o.n, Size: o.objectLen, Limit: o.limit, Populated: took.Seconds(), Date: time.Now().UTC(), Machine: machine(), Command: o.command}
	for _, c := range o.cases {
		r, err := runCase(ctx, o, dir, cp.KubeconfigPath(), c)
		if err != nil {
			return fmt.Errorf("%s: %w", c, err)
		}
		logf("%s", r.summary())
		res.Cases = append(res.Cases, r)
		if err := write(o, res); err != nil { // after each case: a later failure keeps what was measured
			return err
		}
	}
	return nil
}

// cacheDir is the case's cache directory: a restart reuses its first
// start's.
func cacheDir(dir, c string) string {
	switch c {
	case caseDropIn, caseDropInRe:
		return filepath.Join(dir, "jcache")
	case caseDropInNoL:
		return filepath.Join(dir, "jcache-nolimit")
	case caseExact, caseExactRe:
		return filepath.Join(dir, "exact")
	}
	return ""
}

func runCase(ctx context.Context, o options, dir, kubeconfig, c string) (*result, error) {
	r := &result{Case: c}
	cdir := cacheDir(dir, c)
	if cdir != "" && !strings.HasSuffix(c, "-restart") {
		if err := os.RemoveAll(cdir); err != nil {
			return nil, err
		}
	}
	env := append(os.Environ(), envChild+"="+c, envKind+"="+o.kind, envN+"="+strconv.Itoa(o.n), envDir+"="+cdir, "KUBECONFIG="+kubeconfig)
	var cg *memcgroup.Cgroup
	if c != caseCRNoLimit && c != caseDropInNoL {
		var err error
		if cg, err = memcgroup.New("headline", o.limit); err != nil {
			return nil, err
		}
		defer cg.Remove()
		r.Limit, r.How = o.limit, cg.String()+" and GOMEMLIMIT at 90%"
		env = append(env, "GOMEMLIMIT="+strconv.FormatInt(o.limit*9/10, 10))
	}
	self, err := os.Executable()
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(self)
	cmd.Env = env
	lastErr := &lastLine{}
	cmd.Stderr = io.MultiWriter(os.Stderr, lastErr) // the child's own error, for the table
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	logf("%s: starting the operator (%d objects, limit %s)", c, o.n, mib(r.Limit))
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	if cg != nil {
		if err := cg.Add(cmd.Process.Pid); err != nil {
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
			return nil, err
		}
	}
	t0 := time.Now()
	if _, err := stdin.Write([]byte{'g'}); err != nil {
		return nil, err
	}
	since := func(ns int64) float64 { return time.Unix(0, ns).Sub(t0).Seconds() }

	var mu sync.Mutex
	sampled := make(chan struct{})
	go func() { // sample the resident set until the process has gone
		defer close(sampled)
		tick := time.NewTicker(100 * time.Millisecond)
		defer tick.Stop()
		for {
			rss, anon, err := procRSS(cmd.Process.Pid)
			if err != nil {
				return
			}
			mu.Lock()
			r.Samples = append(r.Samples, sample{T: time.Since(t0).Seconds(), RSS: rss, Anon: anon})
			r.PeakRSS, r.PeakAnon = max(r.PeakRSS, rss), max(r.PeakAnon, anon)
			mu.Unlock()
			<-tick.C
		}
	}()

	done := make(chan struct{}) // the case's goal was reached
	reported := make(chan struct{})
	go func() { // read the child's reports
		defer close(reported)
		restart := c == caseExactRe
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			var rep report
			if json.Unmarshal(sc.Bytes(), &rep) != nil {
				continue
			}
			mu.Lock()
			if rep.Distinct > 0 || rep.Reconciles > 0 {
				r.Distinct, r.Reconciles = rep.Distinct, rep.Reconciles
			}
			switch rep.Event {
			case "ready":
				r.Ready = since(rep.T)
			case "first":
				r.First = since(rep.T)
			case "progress":
				logf("%s: %.0f s, %d of %d reconciled, RSS %s", c, since(rep.T), rep.Distinct, o.n, mib(lastRSS(r.Samples)))
			case "all":
				r.All = since(rep.T)
				if !restart {
					close(done)
				}
			case "idle":
				r.Idle = since(rep.T)
				if restart {
					close(done)
				}
			}
			mu.Unlock()
		}
		_, _ = io.Copy(io.Discard, stdout)
	}()

	exited := make(chan error, 1)
	go func() { <-reported; exited <- cmd.Wait() }()
	var werr error
	select {
	case <-done:
		stdin.Close() // stop: the manager stops and the cache closes its files
		select {
		case werr = <-exited:
		case <-time.After(2 * time.Minute):
			_ = cmd.Process.Kill()
			werr = <-exited
			r.Err = "did not stop within 2 minutes of being told"
		}
	case werr = <-exited:
	case <-time.After(o.timeout):
		_ = cmd.Process.Kill()
		<-exited
		r.Err = fmt.Sprintf("timed out after %v", o.timeout)
	case <-ctx.Done():
		_ = cmd.Process.Kill()
		<-exited
		return nil, ctx.Err()
	}
	end := time.Since(t0).Seconds()
	<-sampled
	mu.Lock()
	defer mu.Unlock()
	var ee *exec.ExitError
	if errors.As(werr, &ee) {
		if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() && ws.Signal() == syscall.SIGKILL && r.Err == "" {
			r.Killed, r.KilledAt = true, end
		} else if r.Err == "" {
			r.Err = werr.Error()
			if l := lastErr.String(); l != "" {
				r.Err = l
			}
		}
	} else if werr != nil && r.Err == "" {
		r.Err = werr.Error()
	}
	if cg != nil {
		r.OOMKills, r.PeakCgroup = cg.OOMKills(), cg.Peak()
	}
	if cdir != "" {
		r.Disk = dirSize(cdir)
	}
	return r, nil
}

func lastRSS(s []sample) int64 {
	if len(s) == 0 {
		return 0
	}
	return s[len(s)-1].RSS
}

// procRSS reads VmRSS and RssAnon of process pid, in bytes.
func procRSS(pid int) (rss, anon int64, err error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, 0, err
	}
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(line)
		if len(f) < 2 {
			continue
		}
		v, _ := strconv.ParseInt(f[1], 10, 64)
		switch f[0] {
		case "VmRSS:":
			rss = v << 10
		case "RssAnon:":
			anon = v << 10
		case "State:":
			if f[1] == "Z" { // gone, not yet reaped
				return 0, 0, io.EOF
			}
		}
	}
	return rss, anon, nil
}

func dirSize(dir string) int64 {
	var total int64
	_ = filepath.WalkDir(dir, func(_ string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			if fi, err := d.Info(); err == nil {
				total += fi.Size()
			}
		}
		return nil
	})
	return total
}

func mib(b int64) string {
	if b == 0 {
		return "none"
	}
	return fmt.Sprintf("%.0f MiB", float64(b)/(1<<20))
}

func (r *result) summary() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s: ", r.Case)
	if r.Killed {
		fmt.Fprintf(&b, "KILLED at %.1f s (OOM kills %d); ", r.KilledAt, r.OOMKills)
	}
	if r.Err != "" {
		fmt.Fprintf(&b, "error %s; ", r.Err)
	}
	fmt.Fprintf(&b, "ready %.1f s, first %.1f s, all %.1f s, idle %.1f s; %d distinct, %d reconciles; peak RSS %s (anon %s, cgroup %s); disk %s",
		r.Ready, r.First, r.All, r.Idle, r.Distinct, r.Reconciles, mib(r.PeakRSS), mib(r.PeakAnon), mib(r.PeakCgroup), mib(r.Disk))
	return b.String()
}

// lastLine keeps the last line written to it that starts with "headline
// child": the child's error when it exits with one.
type lastLine struct {
	mu   sync.Mutex
	buf  []byte
	last string
}

func (l *lastLine) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.buf = append(l.buf, p...)
	for {
		i := strings.IndexByte(string(l.buf), '\n')
		if i < 0 {
			break
		}
		if line := string(l.buf[:i]); strings.HasPrefix(line, "headline child") {
			l.last = line
		}
		l.buf = l.buf[i+1:]
	}
	return len(p), nil
}

func (l *lastLine) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.last
}
