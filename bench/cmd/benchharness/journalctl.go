package main

// The journalctl subject: `journalctl watch` as a user runs it, the binary
// next to this one or $BENCH_JOURNALCTL, measured from the outside
// (restartSection's notes say how).

import (
	"cmp"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"github.com/prometheus/procfs"
)

const subjJournalctl = "journalctl"

// journalctlSettle is how long after the sync the steady memory of the
// journalctl process is read.
const journalctlSettle = 3 * time.Second

// runJournalctl runs the journalctl subject at N=n.
func (p *parent) runJournalctl(ctx context.Context, n int) row {
	r := row{N: n, Subject: subjJournalctl}
	bin := cmp.Or(os.Getenv("BENCH_JOURNALCTL"), filepath.Join(filepath.Dir(p.exe), "journalctl"))
	if _, err := os.Stat(bin); err != nil {
		r.Err = fmt.Sprintf("no journalctl binary (%v): build it next to benchharness (make build) or set BENCH_JOURNALCTL", err)
		return r
	}
	dir, err := os.MkdirTemp("", "benchharness-journalctl-")
	if err != nil {
		r.Err = err.Error()
		return r
	}
	defer os.RemoveAll(dir)
	logf("N=%d %s: starting %s watch", n, subjJournalctl, bin)
	first, err := p.startJournalctl(ctx, bin, dir, n)
	if err != nil {
		r.Err = err.Error()
		return r
	}
	r.Synced.Event = "synced"
	r.Relisted.Gone = -1 // no forced relist: the table says none
	r.Synced.SyncSeconds, r.Synced.SyncCPU, r.Synced.Steady = first.seconds, first.cpu, first.steady
	logf("N=%d %s: synced in %.2f s (CPU %.2f s), heap %s, RSS %s (anon %s, VmHWM %s)", n, subjJournalctl, first.seconds, first.cpu,
		mib(first.steady.HeapInuse), mib(first.steady.RSS), mib(first.steady.RSSAnon), mib(first.steady.HWM))
	again, err := p.startJournalctl(ctx, bin, dir, n)
	if err != nil {
		r.RestartErr = "restart with nothing changed: " + err.Error()
		logf("N=%d %s: %s", n, subjJournalctl, r.RestartErr)
		return r
	}
	r.RestartSame = &restartResult{Seconds: again.seconds, restartReport: restartReport{
		CPU: again.cpu, HWM: again.steady.HWM, PeakRSS: again.steady.HWM, Steady: again.steady, Objects: n,
	}}
	logf("N=%d %s: restart (same): synced %.2f s after exec (CPU %.2f s), RSS %s", n, subjJournalctl, again.seconds, again.cpu, mib(again.steady.RSS))
	return r
}

// journalctlRun is one journalctl watch process, measured.
type journalctlRun struct {
	seconds, cpu float64
	steady       memory
}

// startJournalctl runs journalctl watch on dir/configmaps.db until it has
// synced and settled, measures it, and stops it with SIGTERM.
func (p *parent) startJournalctl(ctx context.Context, bin, dir string, n int) (journalctlRun, error) {
	var jr journalctlRun
	addr, err := freeAddr()
	if err != nil {
		return jr, err
	}
	logPath := filepath.Join(dir, "journalctl.log")
	logFile, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return jr, err
	}
	defer logFile.Close()
	cmd := exec.Command(bin, "watch", "configmaps", "--db", filepath.Join(dir, "configmaps.db"), "-n", benchNS,
		"--kubeconfig", p.cp.KubeconfigPath(), "--metrics-addr", addr)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	began := time.Now()
	if err := cmd.Start(); err != nil {
		return jr, err
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	stop := func() error {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case err := <-exited:
			return err
		case <-time.After(30 * time.Second):
			_ = cmd.Process.Kill()
			<-exited
			return fmt.Errorf("journalctl did not stop within 30 s of SIGTERM")
		}
	}
	fail := func(err error) (journalctlRun, error) {
		_ = stop()
		return jr, fmt.Errorf("%w (log: %s)", err, tail(logPath, 600))
	}
	deadline := time.Now().Add(syncTimeout(n))
	url := "http://" + addr + "/metrics"
	var m map[string]float64
	for {
		select {
		case err := <-exited:
			exited <- err
			return fail(fmt.Errorf("journalctl exited before it synced: %v", err))
		default:
		}
		m, err = scrape(ctx, url)
		if err == nil && m["watchjournal_synced"] == 1 {
			break
		}
		if time.Now().After(deadline) {
			return fail(fmt.Errorf("not synced within %v (last scrape: %v, synced %v)", syncTimeout(n), err, m["watchjournal_synced"]))
		}
		time.Sleep(50 * time.Millisecond)
	}
	jr.seconds = time.Since(began).Seconds()
	jr.cpu = procCPU(cmd.Process.Pid)
	if got := int(m["watchjournal_index_objects"]); got != n {
		return fail(fmt.Errorf("synced with %d objects in the index; want %d", got, n))
	}
	time.Sleep(journalctlSettle)
	jr.steady = statusFile(fmt.Sprintf("/proc/%d/status", cmd.Process.Pid))
	if m, err := scrape(ctx, url); err == nil {
		jr.steady.HeapInuse = uint64(m["go_memstats_heap_inuse_bytes"])
		jr.steady.HeapAlloc = uint64(m["go_memstats_heap_alloc_bytes"])
	}
	if err := stop(); err != nil {
		return jr, fmt.Errorf("stopping journalctl: %w (log: %s)", err, tail(logPath, 600))
	}
	return jr, nil
}

// freeAddr returns 127.0.0.1:PORT with a port that was free a moment ago.
func freeAddr() (string, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer ln.Close()
	return ln.Addr().String(), nil
}

// scrape reads the unlabeled gauges, counters and untyped samples of a
// Prometheus text exposition, and those whose only label is resource
// (package metrics labels every journal's series with its resource),
// under their bare names: journalctl watch serves one journal.
func scrape(ctx context.Context, url string) (map[string]float64, error) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("%s: %s", url, resp.Status)
	}
	tp := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := tp.TextToMetricFamilies(resp.Body)
	if err != nil {
		return nil, err
	}
	m := map[string]float64{}
	for name, f := range fams {
		for _, x := range f.GetMetric() {
			if l := x.GetLabel(); len(l) == 0 || len(l) == 1 && l[0].GetName() == "resource" {
				m[name] = cmp.Or(x.GetGauge().GetValue(), x.GetCounter().GetValue(), x.GetUntyped().GetValue())
			}
		}
	}
	return m, nil
}

// procCPU returns a process's utime + stime in seconds (/proc/PID/stat,
// at the usual 100 clock ticks a second); 0 when unreadable.
func procCPU(pid int) float64 {
	p, err := procfs.NewProc(pid)
	if err != nil {
		return 0
	}
	st, err := p.Stat()
	if err != nil {
		return 0
	}
	return st.CPUTime()
}

// tail returns the last max bytes of a file, on one line.
func tail(path string, max int64) string {
	f, err := os.Open(path)
	if err != nil {
		return err.Error()
	}
	defer f.Close()
	if st, err := f.Stat(); err == nil && st.Size() > max {
		_, _ = f.Seek(st.Size()-max, io.SeekStart)
	}
	b, _ := io.ReadAll(f)
	return strings.ReplaceAll(strings.TrimSpace(string(b)), "\n", " | ")
}
