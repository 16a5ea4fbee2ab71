package main

// The parent: the control plane, the ConfigMaps, and one child per subject.

import (
	"bufio"
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"golang.org/x/sync/errgroup"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"

	"github.com/watchjournal/watchjournal/internal/testing/controlplane"
)

const (
	benchNS = "bench"       // the ConfigMaps the subjects watch
	otherNS = "bench-other" // writes that move etcd's revision on, unseen by subjects
	// payloadSize makes a ConfigMap about 1 KiB of JSON as served.
	payloadSize = 700
)

// payload is the data of the ConfigMaps, payloadSize bytes.
var payload = filler("0123456789abcdef", payloadSize)

// parent holds the control plane and the objects created so far.
type parent struct {
	o       options
	cp      *controlplane.ControlPlane
	kube    kubernetes.Interface
	dyn     dynamic.Interface
	created int
	// wl is the workload being run (workload.go); nil for the ConfigMaps.
	// wlCreated counts its objects created.
	wl        *workload
	wlCreated int
	// cacheCreated counts the cache subjects' ConfigMaps created (cache.go).
	cacheCreated int
	gen          int // burst generation, written into each updated object
	exe          string
	// pending is a gap's change still in place (restart.go).
	pending *changeSet
}

func run(ctx context.Context, o options) (*results, error) {
	exe, err := os.Executable()
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "benchharness-")
	if err != nil {
		return nil, err
	}
	if !o.keep {
		defer os.RemoveAll(dir)
	}
	// The apiserver restarts that force relists refill its watch cache
	// from etcd before /readyz answers, which takes longer the more
	// objects it holds, so the wait grows with the largest N.
	sctx, cancel := context.WithTimeout(ctx, 3*time.Minute)
	cp, err := controlplane.Start(sctx, dir, controlplane.Options{
		WatchCache:            true,
		ExtraAPIServerArgs:    []string{"--max-requests-inflight=2000", "--max-mutating-requests-inflight=1000"},
		APIServerReadyTimeout: controlplane.APIServerReadyTimeout + time.Duration(slices.Max(o.ns)/100_000)*30*time.Second,
		Logf:                  logf,
	})
	cancel()
	if err != nil {
		return nil, err
	}
	defer cp.Stop()
	kube, err := kubernetes.NewForConfig(cp.RESTConfig())
	if err != nil {
		return nil, err
	}
	dyn, err := dynamic.NewForConfig(cp.RESTConfig())
	if err != nil {
		return nil, err
	}
	p := &parent{o: o, cp: cp, kube: kube, dyn: dyn, exe: exe}
	res := &results{o: o}
	if err := res.describe(ctx, cp, kube); err != nil {
		logf("describing the machine: %v", err)
	}
	if err := p.createNamespaces(ctx, benchNS, otherNS); err != nil {
		return nil, err
	}
	// The namespace bench only when a subject other than the cache
	// subjects, or the readers, will read it.
	classic := o.readers || slices.ContainsFunc(o.subjects, func(s string) bool { return !isCache(s) })
	configMaps := slices.Contains(o.workloads, wlConfigMaps)
	for _, n := range o.ns {
		if !configMaps {
			break
		}
		if classic {
			c, err := p.createRange(ctx, "ConfigMaps", &p.created, n, func(ctx context.Context, i int) error {
				return p.createConfigMap(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name(i), Namespace: benchNS}, Data: map[string]string{"payload": payload}})
			})
			if err != nil {
				return nil, err
			}
			res.creations = append(res.creations, c)
			if res.objectBytes == 0 {
				res.objectBytes = p.servedSize(ctx, benchNS)
			}
		}
		for _, s := range o.subjects {
			if !isCache(s) {
				res.rows = append(res.rows, p.runSubject(ctx, n, s))
			}
		}
		if o.readers {
			p.readers(ctx, n, res)
		}
		if slices.ContainsFunc(o.subjects, isCache) {
			c, err := p.createCacheObjects(ctx, n)
			if err != nil {
				return nil, err
			}
			res.cacheCreations = append(res.cacheCreations, c)
			if res.cacheObjectBytes == 0 {
				res.cacheObjectBytes = p.servedSize(ctx, cacheNS(0))
			}
			for _, s := range o.subjects {
				switch {
				case s == subjJCacheSharded:
					res.sharded = append(res.sharded, p.runSharded(ctx, n))
				case isCache(s):
					res.caches = append(res.caches, p.runCacheSubject(ctx, n, s))
				}
			}
		}
	}
	for _, name := range o.workloads {
		if name == wlConfigMaps {
			continue
		}
		w, err := workloadByName(name)
		if err != nil {
			return nil, err
		}
		if err := p.runWorkload(ctx, w, res); err != nil {
			return nil, fmt.Errorf("workload %s: %w", name, err)
		}
	}
	if o.gobench != "" {
		if res.gobench, err = os.ReadFile(o.gobench); err != nil {
			return nil, err
		}
	}
	return res, nil
}

// creation records how long creating objects took.
type creation struct {
	From, To int
	Seconds  float64
}

// createRange creates objects *created .. n-1 with o.workers writers, each
// by create (again on transient errors; one that exists already counts as
// created), moves *created on to n, and logs the progress; what names the
// objects in the log.
func (p *parent) createRange(ctx context.Context, what string, created *int, n int, create func(ctx context.Context, i int) error) (creation, error) {
	from := *created
	c := creation{From: from, To: n}
	if n <= from {
		return c, nil
	}
	logf("creating %s %d..%d with %d writers", what, from, n-1, p.o.workers)
	began := time.Now()
	var done atomic.Int64
	err := parallel(ctx, p.o.workers, from, n, func(ctx context.Context, i int) error {
		err := retry(ctx, func() error {
			if err := create(ctx, i); !apierrors.IsAlreadyExists(err) {
				return err
			}
			return nil
		})
		if d := done.Add(1); d%20000 == 0 {
			logf("created %d of %d", from+int(d), n)
		}
		return err
	})
	c.Seconds = time.Since(began).Seconds()
	if err != nil {
		return c, fmt.Errorf("creating %s: %w", what, err)
	}
	*created = n
	logf("created %d %s in %.1f s (%.0f/s)", n-from, what, c.Seconds, float64(n-from)/c.Seconds)
	return c, nil
}

// createConfigMap creates cm in its namespace.
func (p *parent) createConfigMap(ctx context.Context, cm *corev1.ConfigMap) error {
	_, err := p.kube.CoreV1().ConfigMaps(cm.Namespace).Create(ctx, cm, metav1.CreateOptions{})
	return err
}

// createNamespaces creates the namespaces that do not exist yet.
func (p *parent) createNamespaces(ctx context.Context, names ...string) error {
	for _, ns := range names {
		_, err := p.kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{})
		if err != nil && !apierrors.IsAlreadyExists(err) {
			return err
		}
	}
	return nil
}

func name(i int) string { return fmt.Sprintf("cm-%06d", i) }

// servedSize returns the size of ConfigMap cm-000000 of namespace ns as
// served, in bytes of JSON; 0 when it cannot be read.
func (p *parent) servedSize(ctx context.Context, ns string) int {
	b, err := p.kube.CoreV1().RESTClient().Get().AbsPath("/api/v1/namespaces", ns, "configmaps", name(0)).DoRaw(ctx)
	if err != nil {
		return 0
	}
	return len(b)
}

// parallel calls fn for i in [from, to) from workers goroutines and returns
// the first error, after which it starts no more.
func parallel(ctx context.Context, workers, from, to int, fn func(context.Context, int) error) error {
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(workers)
	for i := from; i < to && gctx.Err() == nil; i++ {
		g.Go(func() error { return fn(gctx, i) })
	}
	return cmp.Or(g.Wait(), context.Cause(ctx))
}

// retry retries fn on transient apiserver errors, a few times.
func retry(ctx context.Context, fn func() error) error {
	var err error
	for attempt := range 8 {
		if err = fn(); err == nil {
			return nil
		}
		if !(apierrors.IsTooManyRequests(err) || apierrors.IsServerTimeout(err) || apierrors.IsTimeout(err) ||
			apierrors.IsInternalError(err) || apierrors.IsServiceUnavailable(err) || isConnErr(err)) {
			return err
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(time.Duration(50<<attempt) * time.Millisecond):
		}
	}
	return err
}

func isConnErr(err error) bool {
	s := err.Error()
	return strings.Contains(s, "connection refused") || strings.Contains(s, "connection reset") ||
		strings.Contains(s, "EOF") || strings.Contains(s, "http2")
}

// row is one subject's results at one N.
type row struct {
	N       int    `json:"n"`
	Subject string `json:"subject"`
	Err     string `json:"err,omitempty"`

	Synced report `json:"synced"`

	BurstK     int     `json:"burstK,omitempty"`
	EventsPerS float64 `json:"eventsPerSecond,omitempty"` // K / (all seen − first write)
	WritesPerS float64 `json:"writesPerSecond,omitempty"` // K / (last write acked − first write)
	LagSeconds float64 `json:"lagSeconds,omitempty"`      // all seen − last write acked
	// Relists are the forced relists in order; Relisted sums them up: the
	// median time, the largest peaks, the requests and 410s added up.
	Relists  []report `json:"relists"`
	Relisted report   `json:"relisted"`

	// The relist with 1% changed, the restarts, journalctl (restart.go).
	restartResults

	// Workload is the workload of the row (workload.go); empty for the
	// ConfigMaps. Disk is watchjournal's disk cost over the burst.
	Workload string    `json:"workload,omitempty"`
	Disk     *diskCost `json:"disk,omitempty"`
}

// aggregate sums up several relists of one subject.
func aggregate(rs []report) report {
	var a report
	if len(rs) == 0 {
		return a
	}
	a.Event = "relisted"
	times := make([]float64, 0, len(rs))
	cpus := make([]float64, 0, len(rs))
	for _, x := range rs {
		times = append(times, x.RelistSeconds)
		cpus = append(cpus, x.RelistCPU)
		a.PeakHeap = max(a.PeakHeap, x.PeakHeap)
		a.PeakLive = max(a.PeakLive, x.PeakLive)
		a.PeakRSS = max(a.PeakRSS, x.PeakRSS)
		a.ArmPeakHeap = max(a.ArmPeakHeap, x.ArmPeakHeap)
		a.ArmPeakLive = max(a.ArmPeakLive, x.ArmPeakLive)
		a.ArmPeakRSS = max(a.ArmPeakRSS, x.ArmPeakRSS)
		a.HWM = max(a.HWM, x.HWM)
		a.Lists += x.Lists
		a.WatchLists += x.WatchLists
		a.Pages += x.Pages
		a.Gone += x.Gone
		a.Samples += x.Samples
		a.GCCycles += x.GCCycles
	}
	if rs[0].Gone < 0 {
		a.Gone = -1
	}
	slices.Sort(times)
	a.RelistSeconds = times[len(times)/2]
	slices.Sort(cpus)
	a.RelistCPU = cpus[len(cpus)/2]
	a.After = rs[len(rs)-1].After
	a.Note = rs[len(rs)-1].Note
	return a
}

// child is a running child process.
type child struct {
	cmd     *exec.Cmd
	stdin   io.WriteCloser
	reports chan report
	exited  chan error
}

// close closes the child's stdin (its command loop ends) and waits for it
// to exit, killing it after 30 s.
func (c *child) close() {
	_ = c.stdin.Close()
	select {
	case <-c.exited:
	case <-time.After(30 * time.Second):
		_ = c.cmd.Process.Kill()
		<-c.exited
	}
}

// stop kills the child when err, the caller's result, is set, then closes
// it.
func (c *child) stop(err error) {
	if err != nil {
		_ = c.cmd.Process.Kill()
	}
	c.close()
}

// exit tells the child to exit and waits for its bye.
func (c *child) exit(timeout time.Duration) error {
	if err := c.send(command{Cmd: "exit"}); err != nil {
		return err
	}
	_, err := c.await("bye", timeout)
	return err
}

func (c *child) send(cmd command) error {
	b, _ := json.Marshal(cmd)
	_, err := c.stdin.Write(append(b, '\n'))
	return err
}

// await returns the next report, which must be want.
func (c *child) await(want string, timeout time.Duration) (report, error) {
	select {
	case r, ok := <-c.reports:
		if !ok {
			return report{}, fmt.Errorf("child exited waiting for %q: %v", want, <-c.exited)
		}
		if r.Event == "error" {
			return r, fmt.Errorf("child: %s", r.Err)
		}
		if r.Event != want {
			return r, fmt.Errorf("child sent %q; want %q", r.Event, want)
		}
		return r, nil
	case <-time.After(timeout):
		return report{}, fmt.Errorf("no %q from the child within %v", want, timeout)
	}
}

func (p *parent) startChild(n int, kind string, host, dir string, env ...string) (*child, error) {
	cmd := exec.Command(p.exe)
	ns, tag := benchNS, fmt.Sprintf("N%d-%s", n, kind)
	if p.wl != nil {
		ns, tag = p.wl.ns, p.wl.name+"-"+tag
		env = append(env, envWorkload+"="+p.wl.name)
	}
	cmd.Env = append(os.Environ(),
		envChild+"="+kind, envHost+"="+host, envToken+"="+p.cp.AdminToken(), envNS+"="+ns,
		fmt.Sprintf("%s=%d", envN, n), envDir+"="+dir, envTag+"="+tag)
	cmd.Env = append(cmd.Env, env...)
	cmd.Stderr = os.Stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	c := &child{cmd: cmd, stdin: stdin, reports: make(chan report, 4), exited: make(chan error, 1)}
	go func() { // exits when the child closes stdout (it exited)
		defer close(c.reports)
		sc := bufio.NewScanner(stdout)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		for sc.Scan() {
			var r report
			if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
				logf("child %s: not a report: %q", kind, sc.Text())
				continue
			}
			c.reports <- r
		}
		c.exited <- cmd.Wait()
	}()
	return c, nil
}

// runSubject runs one subject in a child (journalctl: runJournalctl),
// collects its row, and logs its failure.
func (p *parent) runSubject(ctx context.Context, n int, kind string) row {
	r := row{N: n, Subject: kind}
	if kind == subjJournalctl {
		r = p.runJournalctl(ctx, n)
	} else if err := p.subject(ctx, &r); err != nil {
		r.Err = err.Error()
	}
	prefix := ""
	if p.wl != nil {
		r.Workload, prefix = p.wl.name, p.wl.name+" "
	}
	if r.Err != "" {
		logf("%sN=%d %s: %s", prefix, n, kind, r.Err)
	}
	return r
}

func (p *parent) subject(ctx context.Context, r *row) (err error) {
	proxy, err := controlplane.NewProxy(p.cp.APIServerAddr())
	if err != nil {
		return err
	}
	defer proxy.Close()
	dir, err := os.MkdirTemp("", "benchharness-"+r.Subject+"-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	logf("N=%d %s: starting", r.N, r.Subject)
	c, err := p.startChild(r.N, r.Subject, p.cp.ProxiedRESTConfig(proxy).Host, dir)
	if err != nil {
		return err
	}
	defer func() { c.stop(err) }()
	if r.Synced, err = c.await("synced", syncTimeout(r.N)+time.Minute); err != nil {
		return err
	}
	logf("N=%d %s: synced in %.2f s (CPU %.2f s), heap %s, RSS %s", r.N, r.Subject, r.Synced.SyncSeconds, r.Synced.SyncCPU,
		mib(r.Synced.Steady.HeapInuse), mib(r.Synced.Steady.RSS))

	if !bare(r.Subject) {
		if err := p.burst(ctx, c, r); err != nil {
			return fmt.Errorf("burst: %w", err)
		}
		logf("N=%d %s: burst of %d: %.0f events/s (writes %.0f/s), lag %.0f ms", r.N, r.Subject, r.BurstK,
			r.EventsPerS, r.WritesPerS, 1000*r.LagSeconds)
	}

	for i := range p.o.relists {
		x, err := p.relist(ctx, c, proxy, r, nil)
		if err != nil {
			return err
		}
		r.Relists = append(r.Relists, x)
		logf("N=%d %s: relist %d: %.2f s (%.2f s since armed, CPU %.2f s), peak heap %s (live %s; from arming %s), peak RSS %s, lists %d, watch-lists %d, 410s %d",
			r.N, r.Subject, i+1, x.RelistSeconds, x.SinceArmSeconds, x.RelistCPU, mib(x.PeakHeap), mib(x.PeakLive), mib(x.ArmPeakHeap), mib(x.PeakRSS),
			x.Lists, x.WatchLists, x.Gone)
	}
	r.Relisted = aggregate(r.Relists)
	if p.wl == nil { // the 1% change sets are ConfigMaps' (restart.go)
		p.changedRelist(ctx, c, proxy, dir, r)
	}
	if err := c.exit(time.Minute); err != nil {
		return err
	}
	p.restarts(ctx, c, proxy, dir, r)
	return nil
}

// relist has the child arm for a relist, calls gap (when set) and forces
// the relist, and returns the child's report of it.
func (p *parent) relist(ctx context.Context, c *child, proxy *controlplane.Proxy, r *row, gap func() error) (report, error) {
	if err := c.send(command{Cmd: "relist"}); err != nil {
		return report{}, err
	}
	if _, err := c.await("relist-armed", time.Minute); err != nil {
		return report{}, err
	}
	if gap != nil {
		if err := gap(); err != nil {
			return report{}, err
		}
	}
	if err := p.forceRelist(ctx, proxy); err != nil {
		return report{}, fmt.Errorf("forcing the relist: %w", err)
	}
	if bare(r.Subject) {
		if err := c.send(command{Cmd: "go"}); err != nil {
			return report{}, err
		}
	}
	return c.await("relisted", 2*syncTimeout(r.N)+3*time.Minute)
}

// burst updates min(o.burst, N) objects as fast as o.workers writers can
// and measures how soon the child has seen all of them.
func (p *parent) burst(ctx context.Context, c *child, r *row) error {
	k := min(p.o.burst, r.N)
	r.BurstK = k
	p.gen++
	gen := p.gen
	patch := []byte(fmt.Sprintf(`{"data":{"gen":"%d"}}`, gen))
	if err := c.send(command{Cmd: "burst", K: int64(k)}); err != nil {
		return err
	}
	if _, err := c.await("burst-armed", time.Minute); err != nil {
		return err
	}
	first := time.Now()
	err := parallel(ctx, p.o.workers, 0, k, func(ctx context.Context, i int) error {
		if p.wl != nil {
			return p.churnOne(ctx, p.wl, i, gen)
		}
		return retry(ctx, func() error {
			_, err := p.kube.CoreV1().ConfigMaps(benchNS).Patch(ctx, name(i), types.MergePatchType, patch, metav1.PatchOptions{})
			return err
		})
	})
	last := time.Now()
	if err != nil {
		return err
	}
	done, err := c.await("burst-done", 5*time.Minute)
	if err != nil {
		return err
	}
	seen := time.Unix(0, done.DoneUnixNano)
	r.EventsPerS = float64(k) / seen.Sub(first).Seconds()
	r.WritesPerS = float64(k) / last.Sub(first).Seconds()
	r.LagSeconds = seen.Sub(last).Seconds()
	if done.Disk != nil {
		d := *done.Disk
		d.BurstSeconds = seen.Sub(first).Seconds()
		r.Disk = &d
	}
	return nil
}

// forceRelist makes the child's stored resourceVersion unusable and its
// watch reconnect: cut the child's proxy, move etcd's revision on (writes
// the child does not see), compact etcd, and restart the apiserver, so
// that its watch cache starts over at the compacted revision and answers
// a watch from an older resourceVersion with 410 Gone. (With the watch
// cache on, a compaction alone does not: the cache keeps serving watches
// from its own window of events.) Then heal the proxy.
func (p *parent) forceRelist(ctx context.Context, proxy *controlplane.Proxy) error {
	proxy.Cut()
	defer proxy.Heal()
	for i := range 3 {
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("bump-%d-%d", p.gen, i)}}
		p.gen++
		if _, err := p.kube.CoreV1().ConfigMaps(otherNS).Create(ctx, cm, metav1.CreateOptions{}); err != nil {
			return err
		}
	}
	if _, err := p.cp.Compact(ctx); err != nil {
		return err
	}
	// The apiserver fills its watch cache from etcd as it starts: allow
	// more at 1,000,000 objects.
	timeout := 3*time.Minute + time.Duration(p.created)*200*time.Microsecond
	rctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	if err := p.cp.RestartAPIServer(rctx); err != nil {
		return err
	}
	if p.wl != nil {
		return p.waitServed(rctx, p.wl.gvr, p.wl.ns, 3*time.Minute)
	}
	return p.waitServed(rctx, configMaps, benchNS, timeout)
}

func mib(b uint64) string { return fmt.Sprintf("%.1f MiB", float64(b)/(1<<20)) }
