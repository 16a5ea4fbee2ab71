package jcache_test

// Fresh as controller-runtime's cache: with fsync on and a commit made
// slow on purpose (reconcile.Options.CommitHook), a watch event reaches
// the handlers, and a Get through the manager's client returns it, long
// before its batch commits; a process stopped while a batch is staged
// but not committed loses nothing the server does not send again.

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	toolscache "k8s.io/client-go/tools/cache"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	"github.com/watchjournal/watchjournal/internal/testing/controlplane"
	"github.com/watchjournal/watchjournal/jcache"
	"github.com/watchjournal/watchjournal/journal"
	"github.com/watchjournal/watchjournal/reconcile"
)

// slowCommit is how long a commit takes once a test slows it down: far
// above what the freshness bound below allows.
const slowCommit = 2 * time.Second

// freshWithin bounds the time from an API call's return to its event at
// the handler and in a Get: independent of the commit.
const freshWithin = slowCommit / 4

// state is what a handler was given: name → the ConfigMap's data["v"],
// as an informer's handler would rebuild it, and when each name's latest
// event came.
type state struct {
	ns      string // the namespace it keeps; others are ignored
	mu      sync.Mutex
	objs    map[string]string
	at      map[string]time.Time
	changed chan struct{}
}

func newState(ns string) *state {
	return &state{ns: ns, objs: map[string]string{}, at: map[string]time.Time{}, changed: make(chan struct{})}
}

func (s *state) set(o any, present bool) {
	if d, ok := o.(toolscache.DeletedFinalStateUnknown); ok {
		o = d.Obj
	}
	cm := o.(*corev1.ConfigMap)
	if cm.Namespace != s.ns {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if present {
		s.objs[cm.Name] = cm.Data["v"]
	} else {
		delete(s.objs, cm.Name)
	}
	s.at[cm.Name] = time.Now()
	close(s.changed)
	s.changed = make(chan struct{})
}

func (s *state) handler() toolscache.ResourceEventHandler {
	return toolscache.ResourceEventHandlerFuncs{
		AddFunc:    func(o any) { s.set(o, true) },
		UpdateFunc: func(_, o any) { s.set(o, true) },
		DeleteFunc: func(o any) { s.set(o, false) },
	}
}

// waitFor waits until cond holds for the handler's state, and returns
// when it first did; on timeout it fails with the last state seen.
func (s *state) waitFor(t *testing.T, what string, timeout time.Duration, cond func(map[string]string) bool) time.Time {
	t.Helper()
	deadline := time.After(timeout)
	for {
		s.mu.Lock()
		ok, ch, last := cond(s.objs), s.changed, fmtState(s.objs)
		s.mu.Unlock()
		if ok {
			return time.Now()
		}
		select {
		case <-ch:
		case <-deadline:
			t.Fatalf("%s: not within %v; the handler's last state: %s", what, timeout, last)
		}
	}
}

func fmtState(m map[string]string) string {
	var out []string
	for k, v := range m {
		out = append(out, k+"="+v)
	}
	slices.Sort(out)
	return "[" + strings.Join(out, " ") + "]"
}

// hook is a commit hook a test turns on: slow waits slowCommit in each
// batch's transaction, crash never commits (the batch fails once the
// loop's context ends, as if the process died before its fsync).
type hook struct {
	slow, crash atomic.Bool
	commits     atomic.Int64 // slowed or crashed transactions that returned
}

func (h *hook) fn(ctx context.Context) error {
	switch {
	case h.crash.Load():
		<-ctx.Done()
		h.commits.Add(1)
		return errors.New("test: the process died before the commit")
	case h.slow.Load():
		select {
		case <-time.After(slowCommit):
		case <-ctx.Done():
		}
		h.commits.Add(1)
	}
	return nil
}

// startManager starts a manager on the journal cache in dir (fsync on)
// with h as its loops' commit hook, and a handler of ConfigMaps feeding
// st; stop stops it.
func startFreshManager(t *testing.T, cp *controlplane.ControlPlane, dir string, h *hook, st *state) (mgr manager.Manager, stop func()) {
	t.Helper()
	mgr = newManager(t, cp.RESTConfig(), ctrl.Options{
		NewCache: jcache.NewFunc(jcache.Options{Dir: dir, NoSocket: true, Loop: reconcile.Options{CommitHook: h.fn}}),
	})
	inf := getInformer(t, context.Background(), mgr.GetCache(), &corev1.ConfigMap{})
	if _, err := inf.AddEventHandler(st.handler()); err != nil {
		t.Fatal(err)
	}
	stop = runManager(t, mgr).stop
	waitSynced(t, mgr.GetCache(), 60*time.Second)
	return mgr, stop
}

// getWithin polls a Get of ns/name through c until found (or, with
// gone, until not found), at most within, and returns how long it took.
func getWithin(t *testing.T, c client.Client, ns, name string, gone bool, within time.Duration) time.Duration {
	t.Helper()
	start := time.Now()
	for {
		var cm corev1.ConfigMap
		err := c.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, &cm)
		switch {
		case err == nil && !gone, apierrors.IsNotFound(err) && gone:
			return time.Since(start)
		case err != nil && !apierrors.IsNotFound(err):
			t.Fatalf("Get %s: %v", name, err)
		}
		if time.Since(start) > within {
			t.Fatalf("Get %s/%s: still %v after %v (want gone=%v)", ns, name, err, within, gone)
		}
		time.Sleep(100 * time.Microsecond)
	}
}

func TestFresh_OwnWriteBeforeCommit(t *testing.T) {
	cp, _, ns := setup(t)
	dir := t.TempDir()
	h := &hook{}
	st := newState(ns)
	mgr, _ := startFreshManager(t, cp, dir, h, st)
	c := mgr.GetClient()

	h.slow.Store(true)
	_, head0, err := jcache.CommittedKeys(dir)
	if err != nil {
		t.Fatal(err)
	}
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "own"}, Data: map[string]string{"v": "1"}}
	if err := c.Create(context.Background(), cm); err != nil {
		t.Fatal(err)
	}
	created := time.Now()
	took := getWithin(t, c, ns, "own", false, freshWithin)
	seen := st.waitFor(t, "the handler gets the create", freshWithin, func(m map[string]string) bool { return m["own"] == "1" })
	keys, head, err := jcache.CommittedKeys(dir)
	if err != nil {
		t.Fatal(err)
	}
	if slices.Contains(keys, ns+"/own") || head != head0 || h.commits.Load() != 0 {
		t.Fatalf("the batch committed already (head %d, was %d; %d slow commits): the commit hook did not hold it", head, head0, h.commits.Load())
	}
	t.Logf("own write visible to Get in %v, at the handler %v after Create returned, its commit pending", took, seen.Sub(created))

	// A List and a delete, still before their commits.
	var l corev1.ConfigMapList
	if err := c.List(context.Background(), &l, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	if len(l.Items) != 1 || l.Items[0].Name != "own" {
		t.Fatalf("List = %d items; want own", len(l.Items))
	}

	// The commit completes: the file holds the object.
	deadline := time.Now().Add(3 * slowCommit)
	for {
		keys, head, err = jcache.CommittedKeys(dir)
		if err != nil {
			t.Fatal(err)
		}
		if slices.Contains(keys, ns+"/own") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the file never committed %s/own: keys %v, head %d", ns, keys, head)
		}
		time.Sleep(10 * time.Millisecond)
	}
	h.slow.Store(false)
	if err := c.Delete(context.Background(), cm); err != nil {
		t.Fatal(err)
	}
	getWithin(t, c, ns, "own", true, 30*time.Second)
	st.waitFor(t, "the handler gets the delete", 30*time.Second, func(m map[string]string) bool { _, ok := m["own"]; return !ok })
}

func TestFresh_CrashBeforeCommitLosesNothing(t *testing.T) {
	cp, kube, ns := setup(t)
	dir := t.TempDir()
	for _, n := range []string{"a", "b", "c"} {
		createCM(t, kube, ns, n, nil, map[string]string{"v": "1"})
	}
	h := &hook{}
	st := newState(ns)
	mgr, stop := startFreshManager(t, cp, dir, h, st)
	st.waitFor(t, "the first list", 30*time.Second, func(m map[string]string) bool { return len(m) == 3 })

	// From now on no batch commits: the process dies before each fsync.
	h.crash.Store(true)
	ctx := context.Background()
	deleteCM(t, ctx, kube, ns, "a")
	updateCM(t, ctx, kube, ns, "b", func(b *corev1.ConfigMap) {
		b.Data["v"] = "2"
	})
	createCM(t, kube, ns, "d", nil, map[string]string{"v": "1"})
	want := map[string]string{"b": "2", "c": "1", "d": "1"}
	same := func(m map[string]string) bool { return fmtState(m) == fmtState(want) }
	// The batch of the delete (the first change) never commits; the
	// changes after it are planned while it hangs: the handler and reads
	// see all of them, the file none.
	st.waitFor(t, "the handler gets the changes before their commit", 30*time.Second, same)
	getWithin(t, mgr.GetClient(), ns, "a", true, 30*time.Second)
	getWithin(t, mgr.GetClient(), ns, "d", false, 30*time.Second)
	keys, _, err := jcache.CommittedKeys(dir)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(keys, ns+"/a") || slices.Contains(keys, ns+"/d") {
		t.Fatalf("the file committed the changes (keys %v): the hook did not hold them", keys)
	}
	stop()
	if h.commits.Load() == 0 {
		t.Fatal("no batch reached the commit hook")
	}

	// The restart: the file resumes from its committed resourceVersion,
	// the server sends the changes again; nothing is missing, a is gone.
	st2 := newState(ns)
	mgr2, _ := startFreshManager(t, cp, dir, &hook{}, st2)
	st2.waitFor(t, "the restarted handler's state", 30*time.Second, same)
	var l corev1.ConfigMapList
	if err := mgr2.GetClient().List(ctx, &l, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, cm := range l.Items {
		got[cm.Name] = cm.Data["v"]
	}
	if !same(got) {
		t.Fatalf("List after the restart = %s; want %s", fmtState(got), fmtState(want))
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		keys, head, err := jcache.CommittedKeys(dir)
		if err != nil {
			t.Fatal(err)
		}
		if slices.Equal(inNamespace(keys, ns), []string{ns + "/b", ns + "/c", ns + "/d"}) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the restarted file holds %v at head %d; want b, c, d", keys, head)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// inNamespace returns the keys of namespace ns.
func inNamespace(keys []string, ns string) []string {
	var out []string
	for _, k := range keys {
		if strings.HasPrefix(k, ns+"/") {
			out = append(out, k)
		}
	}
	return out
}

// A batch given to the handler whose commit fails (a full disk) is given
// again once the server sends it again, and the handlers' record never
// claims an offset the file does not hold.
func TestFresh_FailedCommitGivenAgain(t *testing.T) {
	cp, kube, ns := setup(t)
	dir := t.TempDir()
	var fail atomic.Bool
	var adds atomic.Int64
	h := &hook{}
	st := newState(ns)
	mgr := newManager(t, cp.RESTConfig(), ctrl.Options{
		NewCache: jcache.NewFunc(jcache.Options{Dir: dir, NoSocket: true, Loop: reconcile.Options{CommitHook: func(ctx context.Context) error {
			if fail.CompareAndSwap(true, false) {
				// Once a handler was given the batch: then the disk is full.
				for adds.Load() == 0 && ctx.Err() == nil {
					time.Sleep(time.Millisecond)
				}
				return fmt.Errorf("test: %w", journal.ErrNoSpace)
			}
			return h.fn(ctx)
		}}}),
	})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	addHandler(t, ctx, mgr.GetCache(), &corev1.ConfigMap{}, st.handler())
	addHandler(t, ctx, mgr.GetCache(), &corev1.ConfigMap{}, toolscache.ResourceEventHandlerFuncs{AddFunc: func(o any) {
		if o.(*corev1.ConfigMap).Name == "x" {
			adds.Add(1)
		}
	}})
	done := make(chan error, 1)
	go func() { done <- mgr.Start(ctx) }()
	defer func() { cancel(); <-done }()
	waitSynced(t, mgr.GetCache(), 60*time.Second)

	fail.Store(true)
	createCM(t, kube, ns, "x", nil, map[string]string{"v": "1"})
	st.waitFor(t, "the handler gets x", 30*time.Second, func(m map[string]string) bool { return m["x"] == "1" })
	deadline := time.Now().Add(30 * time.Second)
	for {
		keys, head, err := jcache.CommittedKeys(dir)
		if err != nil {
			t.Fatal(err)
		}
		if slices.Contains(keys, ns+"/x") {
			record, _, err := jcache.HandlersRecord(dir)
			if err != nil {
				t.Fatal(err)
			}
			if record > head {
				t.Fatalf("the handlers' record %d is past the file's head %d", record, head)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("x never committed after the failed commit: keys %v, head %d, failure pending %v", inNamespace(keys, ns), head, fail.Load())
		}
		time.Sleep(10 * time.Millisecond)
	}
	if fail.Load() {
		t.Fatal("the commit hook never failed a commit")
	}
	// Given before the failed commit, and again with the batch the
	// server sent again.
	deadline = time.Now().Add(30 * time.Second)
	for adds.Load() < 2 {
		if time.Now().After(deadline) {
			t.Fatalf("x added %d times; want 2 (before the failed commit, and after it)", adds.Load())
		}
		time.Sleep(10 * time.Millisecond)
	}
}
