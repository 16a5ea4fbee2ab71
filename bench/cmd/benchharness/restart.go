package main

// The restart measurements, the parent's side: after a subject's forced
// relists, a relist after a gap in which 1% of the objects changed, then
// restarts of the subject (restartchild.go) with nothing changed and with
// 1% changed while it was down; restartSection's notes (restart_results.go)
// say how. The bare subjects have no restart (a restart is their sync).

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/watchjournal/watchjournal/internal/testing/controlplane"
)

// envRestart makes a child a restarted subject (restartchild.go): "same"
// or "changed".
const envRestart = "BENCH_RESTART"

// expectedFile is the file, in the subject's directory, that lists the
// changes made while the subject was down: "TYPE namespace/name" a line.
const expectedFile = "restart-expected.txt"

// restartResults are a row's restart measurements.
type restartResults struct {
	// Changed is how many objects each 1% gap changed (modified + deleted
	// + created).
	Changed int `json:"changed,omitempty"`
	// ChangedRelist is the forced relist after a gap with Changed changes.
	ChangedRelist    *report `json:"changedRelist,omitempty"`
	ChangedRelistErr string  `json:"changedRelistErr,omitempty"`
	// RestartSame and RestartChanged are the restarts with nothing and
	// with Changed objects changed while the subject was down.
	RestartSame    *restartResult `json:"restartSame,omitempty"`
	RestartChanged *restartResult `json:"restartChanged,omitempty"`
	RestartErr     string         `json:"restartErr,omitempty"`
}

// restartResult is one restart as the parent saw it.
type restartResult struct {
	// Seconds is from the parent's exec of the process until the child
	// reported synced.
	Seconds float64 `json:"seconds"`
	restartReport
}

// restartReport is what a restarted child reports once synced.
type restartReport struct {
	SyncedUnixNano int64 `json:"syncedUnixNano"`
	// SubjectSeconds is from the subject's creation (after the process
	// started) until synced.
	SubjectSeconds float64 `json:"subjectSeconds"`
	// CPU is the process's CPU time (user + system) until synced.
	CPU float64 `json:"cpuSeconds"`
	// Bytes are the response body bytes read from the apiserver until
	// synced (every request: discovery, lists, watches); Requests counts
	// the requests.
	Bytes    int64 `json:"bytes"`
	Requests int64 `json:"requests"`
	// Lists (first pages), Pages, Watches, WatchLists as requests counts
	// them.
	Lists, Pages, Watches, WatchLists int64
	// PeakHeap, PeakLive and PeakRSS are the largest HeapInuse, live heap
	// and VmRSS sampled every 50 ms (and after every GC) from the start of
	// the process until synced; HWM is VmHWM at sync.
	PeakHeap uint64 `json:"peakHeap"`
	PeakLive uint64 `json:"peakLive"`
	PeakRSS  uint64 `json:"peakRSS"`
	HWM      uint64 `json:"hwm"`
	// Steady is measured once synced, after a GC.
	Steady memory `json:"steady"`
	// Objects is how many objects the subject holds at sync.
	Objects int `json:"objects"`
	// Gone is, for watchjournal, the 410s its loop met until synced (0:
	// the stored resourceVersion was served); -1 for other subjects.
	Gone int `json:"gone"`
	// watchjournal: Journaled is the events appended from the reopen until
	// synced; KeysExpected the changes the parent made while it was down;
	// KeysMissing, KeysExtra and KeysWrong (wrong type, or more than one
	// event) compare the two. Check says it in words.
	Journaled    int    `json:"journaled"`
	KeysExpected int    `json:"keysExpected"`
	KeysMissing  int    `json:"keysMissing"`
	KeysExtra    int    `json:"keysExtra"`
	KeysWrong    int    `json:"keysWrong"`
	Check        string `json:"check,omitempty"`
}

// changeSet is one gap's changes, by object name in benchNS.
type changeSet struct {
	Modified, Deleted, Created []string
}

func (cs changeSet) total() int { return len(cs.Modified) + len(cs.Deleted) + len(cs.Created) }

// expected returns the changes as "TYPE namespace/name" lines, sorted.
func (cs changeSet) expected() []string {
	var out []string
	for _, x := range []struct {
		typ   string
		names []string
	}{{"MODIFIED", cs.Modified}, {"DELETED", cs.Deleted}, {"ADDED", cs.Created}} {
		for _, n := range x.names {
			out = append(out, x.typ+" "+benchNS+"/"+n)
		}
	}
	sort.Strings(out)
	return out
}

// planChange chooses 1% of n objects (at least one), spread over the key
// space: one in 20 of them deleted, as many created (named after a
// neighbour, so that they land between existing keys), the rest modified.
// With undo (the set a previous gap applied and nothing restored since),
// it re-creates undo's deletes and deletes undo's creates instead, and
// modifies other objects than undo did.
func (p *parent) planChange(n int, undo *changeSet) changeSet {
	k := max(1, n/100)
	stride := max(1, n/k)
	var cs changeSet
	if undo != nil {
		cs.Created = append(cs.Created, undo.Deleted...)
		cs.Deleted = append(cs.Deleted, undo.Created...)
	}
	d := k / 20
	for j := 0; j < k; j++ {
		i := (j*stride + stride/2) % n
		switch {
		case undo == nil && d > 0 && j%20 == 10 && len(cs.Deleted) < d:
			cs.Deleted = append(cs.Deleted, name(i))
		case undo == nil && d > 0 && j%20 == 5 && len(cs.Created) < d:
			cs.Created = append(cs.Created, fmt.Sprintf("%s-g%d", name(i), p.gen))
		case cs.total() < k:
			if undo != nil {
				i = (i + 1) % n // not undo's modified objects, nor its re-created ones
			}
			cs.Modified = append(cs.Modified, name(i))
		}
	}
	return cs
}

// apply makes the changes with o.workers writers: a merge patch of a new
// "gen" for each modified object, deletes, and creates of ConfigMaps like
// the others. Deleting what is gone and creating what exists already
// count as done, so that apply can be repeated.
func (p *parent) apply(ctx context.Context, cs changeSet) error {
	p.gen++
	patch := []byte(fmt.Sprintf(`{"data":{"gen":"%d"}}`, p.gen))
	var ops []func(context.Context) error
	cms := p.kube.CoreV1().ConfigMaps(benchNS)
	for _, n := range cs.Modified {
		ops = append(ops, func(ctx context.Context) error {
			_, err := cms.Patch(ctx, n, types.MergePatchType, patch, metav1.PatchOptions{})
			return err
		})
	}
	for _, n := range cs.Deleted {
		ops = append(ops, func(ctx context.Context) error {
			err := cms.Delete(ctx, n, metav1.DeleteOptions{})
			if apierrors.IsNotFound(err) {
				return nil
			}
			return err
		})
	}
	for _, n := range cs.Created {
		ops = append(ops, func(ctx context.Context) error {
			cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: n}, Data: map[string]string{"payload": payload}}
			_, err := cms.Create(ctx, cm, metav1.CreateOptions{})
			if apierrors.IsAlreadyExists(err) {
				return nil
			}
			return err
		})
	}
	return parallel(ctx, p.o.workers, 0, len(ops), func(ctx context.Context, i int) error {
		return retry(ctx, func() error { return ops[i](ctx) })
	})
}

// restorePending undoes the deletes and creates of a gap whose changes are
// still in place (p.pending), so that the namespace holds the N created
// names again.
func (p *parent) restorePending(ctx context.Context) {
	if p.pending == nil {
		return
	}
	undo := changeSet{Created: p.pending.Deleted, Deleted: p.pending.Created}
	p.pending = nil
	if err := p.apply(ctx, undo); err != nil {
		logf("restoring the objects a gap deleted and created: %v", err)
	}
}

// changedRelist forces one more relist, with 1% of the objects changed
// during the gap, and records it in r (errors too: the row's other
// measurements stand).
func (p *parent) changedRelist(ctx context.Context, c *child, proxy *controlplane.Proxy, dir string, r *row) {
	p.restorePending(ctx)
	cs := p.planChange(r.N, nil)
	r.Changed = cs.total()
	x, err := p.relist(ctx, c, proxy, r, func() error {
		proxy.Cut() // before the changes, so that the child sees none of them live
		p.pending = &cs
		if err := p.apply(ctx, cs); err != nil {
			proxy.Heal()
			return fmt.Errorf("changing 1%%: %w", err)
		}
		// For watchjournal's check of what the relist journaled (written
		// before the relist can begin: the proxy is cut).
		if err := writeExpected(dir, &cs); err != nil {
			proxy.Heal()
			return err
		}
		return nil
	})
	if err == nil {
		r.ChangedRelist = &x
		logf("N=%d %s: relist with %d changed: %.2f s (CPU %.2f s), peak heap %s (live %s), lists %d, watch-lists %d, 410s %d",
			r.N, r.Subject, cs.total(), x.RelistSeconds, x.RelistCPU, mib(x.PeakHeap), mib(x.PeakLive), x.Lists, x.WatchLists, x.Gone)
	} else {
		r.ChangedRelistErr = err.Error()
		logf("N=%d %s: relist with 1%% changed: %v", r.N, r.Subject, err)
	}
	if bare(r.Subject) {
		p.restorePending(ctx)
	}
}

// restarts runs the restarts of a subject whose first child (c) has said
// bye, in the same directory, and restores the objects afterwards.
func (p *parent) restarts(ctx context.Context, c *child, proxy *controlplane.Proxy, dir string, r *row) {
	defer p.restorePending(ctx)
	if bare(r.Subject) {
		return
	}
	// The first child must have exited (and closed its journal) first.
	select {
	case err := <-c.exited:
		c.exited <- err // for subject's deferred wait
	case <-time.After(time.Minute):
		r.RestartErr = "the first process did not exit within a minute"
		return
	}
	err := func() error {
		same, err := p.restartOnce(ctx, r, proxy, dir, nil)
		if err != nil {
			return fmt.Errorf("restart with nothing changed: %w", err)
		}
		r.RestartSame = same
		if p.wl != nil { // the 1% change sets are ConfigMaps'
			return nil
		}
		// With the changed relist's changes in place, this gap undoes its
		// deletes and creates: the names are the N created ones again.
		undo := p.pending
		cs := p.planChange(r.N, undo)
		if undo == nil {
			p.pending = &cs
		}
		if err := p.apply(ctx, cs); err != nil {
			return fmt.Errorf("changing 1%% while the subject is down: %w", err)
		}
		if undo != nil {
			p.pending = nil
		}
		changed, err := p.restartOnce(ctx, r, proxy, dir, &cs)
		if err != nil {
			return fmt.Errorf("restart with 1%% changed: %w", err)
		}
		r.RestartChanged = changed
		return nil
	}()
	if err != nil {
		r.RestartErr = err.Error()
		logf("N=%d %s: %v", r.N, r.Subject, err)
	}
}

// writeExpected writes the changes of cs (nil: none) into dir's expected
// file.
func writeExpected(dir string, cs *changeSet) error {
	var body string
	if cs != nil && cs.total() > 0 {
		body = strings.Join(cs.expected(), "\n") + "\n"
	}
	return os.WriteFile(filepath.Join(dir, expectedFile), []byte(body), 0o644)
}

// restartOnce starts the subject in a new process in dir, waits until it
// reports synced, and stops it. cs is the change made while it was down
// (nil: none).
func (p *parent) restartOnce(ctx context.Context, r *row, proxy *controlplane.Proxy, dir string, cs *changeSet) (_ *restartResult, err error) {
	mode := "same"
	if cs != nil {
		mode = "changed"
	}
	if err := writeExpected(dir, cs); err != nil {
		return nil, err
	}
	began := time.Now()
	c, err := p.startChild(r.N, r.Subject, p.cp.ProxiedRESTConfig(proxy).Host, dir, envRestart+"="+mode)
	if err != nil {
		return nil, err
	}
	defer func() { c.stop(err) }()
	x, err := c.await("restarted", syncTimeout(r.N)+time.Minute)
	if err != nil {
		return nil, err
	}
	if x.Restart == nil {
		return nil, fmt.Errorf("the restarted child sent no restart report")
	}
	res := &restartResult{restartReport: *x.Restart}
	res.Seconds = time.Unix(0, res.SyncedUnixNano).Sub(began).Seconds()
	check := ""
	if res.Check != "" {
		check = "; " + res.Check
	}
	logf("N=%d %s: restart (%s): synced %.2f s after exec (%.2f s after the subject's start, CPU %.2f s), %s received in %d requests (lists %d, watch-lists %d, watches %d), peak heap %s, peak RSS %s%s",
		r.N, r.Subject, mode, res.Seconds, res.SubjectSeconds, res.CPU, mib(uint64(res.Bytes)), res.Requests, res.Lists, res.WatchLists, res.Watches,
		mib(res.PeakHeap), mib(res.PeakRSS), check)
	return res, c.exit(time.Minute)
}
