package reconcile_test

// Reasons of DELETED events against the real apiserver (reason.go): a key
// that leaves the label selector is left-selector, a deleted object gone,
// live on a watch, replayed by a resumed watch, and after a restart whose
// resourceVersion was compacted (relist + lookup); a lookup that fails
// leaves the delete unconfirmed but journaled.

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/watchjournal/watchjournal/journal"
)

// selectorEnv makes e's journal one of the ConfigMaps labelled app=in, and
// creates a, b and c with that label.
func selectorEnv(e *env) *env {
	e.res.LabelSelector = "app=in"
	for _, n := range []string{"a", "b", "c"} {
		e.createLabelled(n, "in")
	}
	return e
}

func (e *env) createLabelled(name, app string) {
	e.t.Helper()
	_, err := e.kube.CoreV1().ConfigMaps(e.ns).Create(context.Background(),
		&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"app": app}}}, metav1.CreateOptions{})
	if err != nil {
		e.t.Fatalf("create %s: %v", name, err)
	}
}

func (e *env) relabel(name, app string) {
	e.t.Helper()
	ctx := context.Background()
	cm, err := e.kube.CoreV1().ConfigMaps(e.ns).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		e.t.Fatalf("get %s: %v", name, err)
	}
	cm.Labels["app"] = app
	if _, err := e.kube.CoreV1().ConfigMaps(e.ns).Update(ctx, cm, metav1.UpdateOptions{}); err != nil {
		e.t.Fatalf("relabel %s: %v", name, err)
	}
}

// reasonsFrom returns "TYPE name origin reason" for the events from offset
// from.
func (e *env) reasonsFrom(from uint64) []string {
	e.t.Helper()
	_, evs := e.eventsFrom(from)
	var s []string
	for _, ev := range evs {
		s = append(s, strings.TrimSpace(fmt.Sprintf("%s %s %s %s", ev.Type, strings.TrimPrefix(ev.Key, e.ns+"/"), ev.Origin, ev.Reason)))
	}
	return s
}

// On a watch: a moves out of the label selector (the apiserver sends
// DELETED with a's old labels, which still match), b is deleted.
// Watch cache off and on (production apiservers run with it).
func TestLoop_Reason_Watch(t *testing.T) {
	for _, c := range envs {
		t.Run(c.name, func(t *testing.T) {
			e := selectorEnv(c.env(t))
			h := e.startListed(nil, testOptions(t))
			e.relabel("a", "out")
			e.delete("b")
			e.waitHead(h + 2)
			equal(t, "events", e.reasonsFrom(h+1), []string{"DELETED a watch left-selector", "DELETED b watch gone"})
		})
	}
}

// envs are the two control planes: watch cache off and on.
var envs = []struct {
	name string
	env  func(*testing.T) *env
}{{"watch cache off", newEnv}, {"watch cache on", watchCacheEnv}}

// After a restart whose resourceVersion was compacted away, the relist
// finds a and b absent and asks the server, at the list's
// resourceVersion: a exists (left-selector), b does not (gone). c was
// deleted and created again with the label: a new UID, gone then ADDED.
func TestLoop_Reason_RestartRelist(t *testing.T) {
	e := selectorEnv(newEnv(t))
	h := e.startListed(nil, testOptions(t))
	e.stop()
	e.relabel("a", "out")
	e.delete("b")
	e.delete("c")
	e.createLabelled("c", "in")
	e.compact()
	e.start(nil, testOptions(t))
	e.waitStatus("relist after the restart", watching(1))
	equal(t, "events", e.reasonsFrom(h+1), []string{"DELETED a restart left-selector", "DELETED b restart gone", "DELETED c restart gone", "ADDED c restart"})
	e.checkIndex(e.j)
}

// After a restart whose resourceVersion is still served, the watch replays
// the history; each DELETED is looked up at its own resourceVersion, so a
// that left and came back is left-selector (then ADDED), and b, relabelled
// out and then deleted, is left-selector at its exit: the journal saw it
// leave, and its deletion happened outside the selector.
func TestLoop_Reason_ResumedWatchReplay(t *testing.T) {
	for _, c := range envs {
		t.Run(c.name, func(t *testing.T) {
			e := selectorEnv(c.env(t))
			h := e.startListed(nil, testOptions(t))
			e.stop()
			e.relabel("a", "out")
			e.relabel("a", "in")
			e.relabel("b", "out")
			e.delete("b")
			e.delete("c")
			e.start(nil, testOptions(t))
			e.waitHead(h + 4)
			equal(t, "events", e.reasonsFrom(h+1), []string{"DELETED a watch left-selector", "ADDED a watch", "DELETED b watch left-selector", "DELETED c watch gone"})
		})
	}
}

// failLookups answers the lookups of reason.go (a list by metadata.name)
// with 500 while on, those at an exact resourceVersion with the 410 of a
// compacted one while expire, and counts every lookup.
type failLookups struct {
	mu      sync.Mutex
	on      bool
	expire  bool
	lookups int
	current int // lookups without a resourceVersion
}

func (f *failLookups) wrap(rt http.RoundTripper) http.RoundTripper {
	return roundTripFunc(func(req *http.Request) (*http.Response, error) {
		q := req.URL.Query()
		if !strings.HasPrefix(q.Get("fieldSelector"), "metadata.name=") {
			return rt.RoundTrip(req)
		}
		f.mu.Lock()
		f.lookups++
		if q.Get("resourceVersion") == "" {
			f.current++
		}
		on, expire := f.on, f.expire && q.Get("resourceVersionMatch") == "Exact"
		f.mu.Unlock()
		body := ""
		switch {
		case on:
			body = `{"kind":"Status","apiVersion":"v1","status":"Failure","message":"injected","reason":"InternalError","code":500}`
		case expire:
			body = `{"kind":"Status","apiVersion":"v1","status":"Failure","message":"The resourceVersion for the provided list is too old.","reason":"Expired","code":410}`
		default:
			return rt.RoundTrip(req)
		}
		code := 500
		if !on {
			code = 410
		}
		return &http.Response{StatusCode: code, Status: http.StatusText(code), Request: req, ProtoMajor: 1, ProtoMinor: 1,
			Header: http.Header{"Content-Type": {"application/json"}}, Body: io.NopCloser(strings.NewReader(body))}, nil
	})
}

// counts returns the lookups so far, and how many of them asked for the
// current state.
func (f *failLookups) counts() (lookups, current int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.lookups, f.current
}

// When the event's resourceVersion is compacted by the time of the lookup
// (410), the current state answers: a, relabelled out, still exists with
// its UID (left-selector); b does not (gone). Two lookups each.
func TestLoop_Reason_LookupCompacted_CurrentState(t *testing.T) {
	e := selectorEnv(newEnv(t))
	f := &failLookups{expire: true}
	h := e.startListed(e.wrapped(f.wrap), testOptions(t))
	e.relabel("a", "out")
	e.waitHead(h + 1)
	e.delete("b")
	e.waitHead(h + 2)
	equal(t, "events", e.reasonsFrom(h+1), []string{"DELETED a watch left-selector", "DELETED b watch gone"})
	if lookups, current := f.counts(); lookups != 4 || current != 2 {
		t.Errorf("%d lookups, %d of the current state; want 4 and 2", lookups, current)
	}
}

// A lookup that keeps failing does not lose the delete: it is journaled
// with reason unconfirmed, after confirmAttempts tries.
func TestLoop_Reason_LookupFails_Unconfirmed(t *testing.T) {
	e := selectorEnv(newEnv(t))
	f := &failLookups{on: true}
	h := e.startListed(e.wrapped(f.wrap), testOptions(t))
	e.relabel("a", "out")
	e.waitHead(h + 1)
	equal(t, "events", e.reasonsFrom(h+1), []string{"DELETED a watch unconfirmed"})
	if lookups, _ := f.counts(); lookups != 3 {
		t.Errorf("%d lookups; want 3 (confirmAttempts)", lookups)
	}
}

// A journal without a selector asks nothing: every DELETED is gone.
func TestLoop_Reason_NoSelector_NoLookup(t *testing.T) {
	e := newEnv(t)
	e.create("a")
	f := &failLookups{}
	h := e.startListed(e.wrapped(f.wrap), testOptions(t))
	e.delete("a")
	e.waitHead(h + 1)
	equal(t, "events", e.reasonsFrom(h+1), []string{"DELETED a watch gone"})
	if lookups, _ := f.counts(); lookups != 0 {
		t.Errorf("%d lookups; want none", lookups)
	}
}

// A relist that finds more deletes than one relist may look up (64) asks
// for 64 of them and journals the others as unconfirmed: every delete is
// journaled, the cost is bounded.
func TestLoop_Reason_RelistBudget(t *testing.T) {
	e := newEnv(t)
	e.res.LabelSelector = "app=in"
	const n = 70
	for i := 0; i < n; i++ {
		e.createLabelled(fmt.Sprintf("o%02d", i), "in")
	}
	f := &failLookups{}
	cfg := e.wrapped(f.wrap)
	opts := testOptions(t)
	opts.PageSize = 500
	h := e.startListed(cfg, opts)
	e.stop()
	for i := 0; i < n; i++ {
		e.relabel(fmt.Sprintf("o%02d", i), "out")
	}
	e.compact()
	e.start(cfg, opts)
	e.waitStatus("relist after the restart", watching(1))
	count := map[string]int{}
	for _, s := range e.reasonsFrom(h + 1) {
		f := strings.Fields(s)
		count[f[0]+" "+f[len(f)-1]]++
	}
	if want := map[string]int{"DELETED left-selector": 64, "DELETED unconfirmed": n - 64}; fmt.Sprint(count) != fmt.Sprint(want) {
		t.Errorf("events by type and reason %v; want %v", count, want)
	}
	if lookups, _ := f.counts(); lookups != 64 {
		t.Errorf("%d lookups; want 64", lookups)
	}
}

// A field selector too: a Pod whose status.phase changes from Pending to
// Running leaves a journal of the Pending Pods (left-selector); a deleted
// Pending Pod is gone.
func TestLoop_Reason_FieldSelector(t *testing.T) {
	e := newEnv(t)
	e.res = journal.Resource{GVR: schema.GroupVersionResource{Version: "v1", Resource: "pods"}, Namespace: e.ns, FieldSelector: "status.phase=Pending"}
	ctx := context.Background()
	pods := e.kube.CoreV1().Pods(e.ns)
	for _, name := range []string{"p", "q"} {
		_, err := pods.Create(ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name},
			Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "none"}}}}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
	}
	h := e.startListed(nil, testOptions(t))
	p, err := pods.Get(ctx, "p", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	p.Status.Phase = corev1.PodRunning
	if _, err := pods.UpdateStatus(ctx, p, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := pods.Delete(ctx, "q", metav1.DeleteOptions{GracePeriodSeconds: new(int64)}); err != nil {
		t.Fatal(err)
	}
	// A Pod's delete may come as MODIFIED (deletionTimestamp) then DELETED:
	// wait for two DELETEDs.
	var deletes []string
	for next := h + 1; len(deletes) < 2; next = e.head() + 1 {
		e.waitHead(next)
		deletes = nil
		for _, s := range e.reasonsFrom(h + 1) {
			if strings.HasPrefix(s, "DELETED") {
				deletes = append(deletes, s)
			}
		}
	}
	equal(t, "deletes", deletes, []string{"DELETED p watch left-selector", "DELETED q watch gone"})
}
