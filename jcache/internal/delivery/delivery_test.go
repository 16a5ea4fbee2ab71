package delivery

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/controller/priorityqueue"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
)

func req(name string) reconcile.Request {
	return reconcile.Request{NamespacedName: types.NamespacedName{Namespace: "ns", Name: name}}
}

func TestCompletes(t *testing.T) {
	for _, c := range []struct {
		name  string
		res   reconcile.Result
		err   error
		done  bool
		after time.Duration
	}{
		{"success", reconcile.Result{}, nil, true, 0},
		{"RequeueAfter", reconcile.Result{RequeueAfter: time.Minute}, nil, true, time.Minute},
		{"Requeue", reconcile.Result{Requeue: true}, nil, false, 0},                                                      //nolint:staticcheck // Requeue is deprecated, still honoured
		{"Requeue and RequeueAfter", reconcile.Result{Requeue: true, RequeueAfter: time.Second}, nil, true, time.Second}, //nolint:staticcheck // as controller-runtime: RequeueAfter wins
		{"error", reconcile.Result{}, errors.New("x"), false, 0},
		{"error with RequeueAfter", reconcile.Result{RequeueAfter: time.Second}, errors.New("x"), false, 0},
		{"TerminalError", reconcile.Result{}, reconcile.TerminalError(errors.New("x")), true, 0},
	} {
		done, after := Completes(c.res, c.err)
		if done != c.done || after != c.after {
			t.Errorf("%s: Completes = %v, %v; want %v, %v", c.name, done, after, c.done, c.after)
		}
	}
}

// One wrapper, two sources' trackers: a request queued by both closes
// on both; a RequeueAfter completes and sets the timer, a later plain
// success clears it; an error closes nothing.
func TestOutcomes_AllTrackersAndTimers(t *testing.T) {
	timers := EmptyTimers(filepath.Join(t.TempDir(), "c.timers"))
	o := NewOutcomes(timers)
	now := time.Date(2026, 12, 2, 12, 0, 0, 0, time.UTC)
	o.now = func() time.Time { return now }
	t1, t2 := NewTracker(0), NewTracker(0)
	o.AddTracker(t1)
	o.AddTracker(t2)
	t1.Add(1, req("a"))
	t1.FedTo(1)
	t2.Add(7, req("a"))
	t2.Add(8, req("b"))
	t2.FedTo(8)
	var out struct {
		res reconcile.Result
		err error
	}
	r := o.Wrap(reconcile.Func(func(context.Context, reconcile.Request) (reconcile.Result, error) { return out.res, out.err }))
	if !o.Wrapped() {
		t.Fatal("Wrapped = false after Wrap")
	}
	out.err = errors.New("failed")
	_, _ = r.Reconcile(context.Background(), req("a"))
	if p1, p2 := t1.Point(), t2.Point(); p1 != 0 || p2 != 6 {
		t.Fatalf("after an error: points %d, %d; want 0, 6", p1, p2)
	}
	out.res, out.err = reconcile.Result{RequeueAfter: time.Minute}, nil
	_, _ = r.Reconcile(context.Background(), req("a"))
	if p1, p2 := t1.Point(), t2.Point(); p1 != 1 || p2 != 7 {
		t.Fatalf("after RequeueAfter: points %d, %d; want 1, 7 (a's entries closed on both)", p1, p2)
	}
	if got := timers.Pending()[req("a")]; !got.Equal(now.Add(time.Minute)) {
		t.Fatalf("a's timer %v; want %v", got, now.Add(time.Minute))
	}
	out.res = reconcile.Result{}
	_, _ = r.Reconcile(context.Background(), req("a"))
	_, _ = r.Reconcile(context.Background(), req("b"))
	if len(timers.Pending()) != 0 || t2.Point() != 8 {
		t.Fatalf("after successes: timers %v, point %d; want none, 8", timers.Pending(), t2.Point())
	}
}

func TestTimers_SaveLoadRearm(t *testing.T) {
	path := filepath.Join(t.TempDir(), "c.timers")
	if _, err := LoadTimers(path); err != nil {
		t.Fatalf("a missing file: %v", err)
	}
	tm := EmptyTimers(path)
	now := time.Now()
	tm.Set(req("past"), now.Add(-time.Second))
	tm.Set(req("later"), now.Add(time.Hour))
	if err := tm.Save(); err != nil {
		t.Fatal(err)
	}
	st, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if st.Mode().Perm() != 0o600 {
		t.Errorf("mode %v; want 0600", st.Mode().Perm())
	}
	back, err := LoadTimers(path)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]time.Duration{}
	back.Rearm(now, func(r reconcile.Request, after time.Duration) { got[r.Name] = after })
	if len(got) != 2 || got["past"] != 0 || got["later"] != time.Hour {
		t.Fatalf("re-armed %v; want past at once, later after 1h", got)
	}
	if err := os.WriteFile(path, []byte("{"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := LoadTimers(path); err == nil {
		t.Fatal("a malformed file loaded without an error")
	} else if !strings.Contains(err.Error(), "removing it starts without the stored timers") {
		t.Errorf("a malformed file's error %q does not say what removing it costs", err)
	}
}

// The queue wrapper records what a handler adds at the offset being
// dispatched, and stays a priority queue when the controller's is one.
func TestQueue_Records(t *testing.T) {
	tr := NewTracker(0)
	pq := priorityqueue.New[reconcile.Request]("test")
	defer pq.ShutDown()
	q := NewQueue(pq, tr)
	w := q.Interface()
	p, ok := w.(priorityqueue.PriorityQueue[reconcile.Request])
	if !ok {
		t.Fatalf("the wrapper of a priority queue is a %T, not a PriorityQueue", w)
	}
	q.SetOffset(3)
	p.AddWithOpts(priorityqueue.AddOpts{Priority: ptrTo(-100)}, req("a"))
	q.SetOffset(4)
	w.Add(req("b"))
	tr.FedTo(4)
	if got := tr.Point(); got != 2 {
		t.Fatalf("point %d; want 2 (a open at 3)", got)
	}
	if n, _ := tr.OpenCount(); n != 2 || pq.Len() != 2 {
		t.Fatalf("open %d, queued %d; want 2, 2", n, pq.Len())
	}
	plain := NewQueue(workqueue.NewTypedRateLimitingQueue(workqueue.DefaultTypedControllerRateLimiter[reconcile.Request]()), tr).Interface()
	if _, ok := plain.(priorityqueue.PriorityQueue[reconcile.Request]); ok {
		t.Fatal("the wrapper of a plain queue claims to be a PriorityQueue")
	}
}

func ptrTo[T any](v T) *T { return &v }

// A reconcile that began before a Reset (a replay queued its request
// again) closes nothing after it: it may have read the state before the
// replay's.
func TestTracker_ResetGeneration(t *testing.T) {
	tr := NewTracker(0)
	tr.Add(5, req("a"))
	tr.FedTo(5)
	m := tr.Begin(req("a"))
	tr.Reset(0)
	tr.Add(1, req("a"))
	tr.FedTo(9)
	tr.Succeeded(req("a"), m)
	if p := tr.Point(); p != 0 {
		t.Fatalf("point %d after a success begun before the Reset; want 0 (a's replay entry open)", p)
	}
	tr.Succeeded(req("a"), tr.Begin(req("a")))
	if p := tr.Point(); p != 9 {
		t.Fatalf("point %d; want 9", p)
	}
}
