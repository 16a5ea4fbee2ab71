package adapt_test

// WatchConsumer's commit: an event counts as processed
// once the receiver comes back for the next one, or calls Stop. Each test
// "kills" a process at one point: it closes the journal (the file lock
// goes, as with a dead process) without Stop, opens the file again as a
// new process would, and looks at the first event a new Watcher on the
// same consumer hands over.

import (
	"fmt"
	"path/filepath"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/watchjournal/watchjournal/journal"
	"github.com/watchjournal/watchjournal/journal/adapt"
)

// appendAdded appends an ADDED for each name to the file at j, in one
// transaction (so one read takes them all).
func appendAdded(t *testing.T, j *journal.Journal, rv string, names ...string) {
	t.Helper()
	if err := j.Writer().Update(func(tx *journal.Tx) error {
		for _, n := range names {
			obj := []byte(`{"kind":"ConfigMap","apiVersion":"v1","metadata":{"name":"` + n + `","namespace":"demo","uid":"u-` + n + `","resourceVersion":"` + rv + `"}}`)
			e := journal.Event{Type: journal.Added, Key: "demo/" + n, UID: "u-" + n, ResourceVersion: rv, Object: obj, Origin: journal.OriginWatch}
			if _, err := tx.Append(&e); err != nil {
				return err
			}
		}
		return tx.SetResourceVersion(rv)
	}); err != nil {
		t.Fatal(err)
	}
}

// waitCommitted waits until the consumer's committed offset in the file
// reaches at least off, and returns it.
func waitCommitted(t *testing.T, j *journal.Journal, consumer string, off uint64) uint64 {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for {
		got, err := j.Consumers().Committed(consumer)
		if err != nil {
			t.Fatal(err)
		}
		if got >= off {
			return got
		}
		if time.Now().After(deadline) {
			t.Fatalf("consumer %s committed %d after 60s; want at least %d", consumer, got, off)
		}
		time.Sleep(5 * time.Millisecond) // the Watcher commits from its own goroutine
	}
}

func TestWatchConsumer_CommitsOnlyWhatTheReceiverCameBackFrom(t *testing.T) {
	res := journal.Resource{GVR: schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}, Namespace: "demo",
		Kind: "ConfigMap", APIVersion: "v1"}
	for _, tc := range []struct {
		name string
		// run receives from w as a process would, then the process dies
		// (stop false) or stops (stop true).
		run  func(t *testing.T, j *journal.Journal, w *adapt.Watcher)
		stop bool
		// want is the first name the next process is handed.
		want string
	}{
		{"received the first of a read, not processed: handed over again", func(t *testing.T, j *journal.Journal, w *adapt.Watcher) {
			recv(t, w, "a")
		}, false, "a"},
		{"came back for the second: the first is not handed over again", func(t *testing.T, j *journal.Journal, w *adapt.Watcher) {
			recv(t, w, "a")
			recv(t, w, "b")
			// The Watcher waits for the receiver to come back for c; it
			// writes a's commit meanwhile.
			if got := waitCommitted(t, j, "w", 1); got != 1 {
				t.Fatalf("committed %d while b is being processed; want 1 (a)", got)
			}
		}, false, "b"},
		{"received the last of a read, waiting at the head: handed over again", func(t *testing.T, j *journal.Journal, w *adapt.Watcher) {
			for _, n := range []string{"a", "b", "c", "d"} {
				recv(t, w, n)
			}
			// The Watcher has committed c (the receiver came back after
			// it) and waits at the head; d is being processed.
			if got := waitCommitted(t, j, "w", 3); got != 3 {
				t.Fatalf("committed %d while d is being processed; want 3 (c)", got)
			}
		}, false, "d"},
		{"stopped after processing two: the third is next", func(t *testing.T, j *journal.Journal, w *adapt.Watcher) {
			recv(t, w, "a")
			recv(t, w, "b")
		}, true, "c"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "j.db")
			j, err := journal.Open(path, &journal.Options{Resource: &res, NoSync: true})
			if err != nil {
				t.Fatal(err)
			}
			appendAdded(t, j, "10", "a", "b", "c", "d")
			c, err := j.Consumers().Open("w")
			if err != nil {
				t.Fatal(err)
			}
			w, err := adapt.WatchConsumer(c, nil)
			if err != nil {
				t.Fatal(err)
			}
			tc.run(t, j, w)
			if tc.stop {
				w.Stop()
				<-w.Done()
			}
			_ = j.Close() // killed: no Stop

			// The next process; e is journaled while it starts.
			j, err = journal.Open(path, &journal.Options{Resource: &res, NoSync: true})
			if err != nil {
				t.Fatal(err)
			}
			defer j.Close()
			w.Stop() // the dead process's goroutine: its commit fails on the closed journal
			<-w.Done()
			appendAdded(t, j, "11", "e")
			c, err = j.Consumers().Open("w")
			if err != nil {
				t.Fatal(err)
			}
			w2, err := adapt.WatchConsumer(c, nil)
			if err != nil {
				t.Fatal(err)
			}
			defer func() { w2.Stop(); <-w2.Done() }()
			ev, ok := next(t, w2)
			if !ok || name(ev) != tc.want {
				committed, _ := j.Consumers().Committed("w")
				t.Fatalf("after the restart the first event is %v %s (open %v, committed %d); want %s", ev.Type, name(ev), ok, committed, tc.want)
			}
		})
	}
}

// recv receives the next event from w and checks it is the ADDED of want.
func recv(t *testing.T, w *adapt.Watcher, want string) {
	t.Helper()
	ev, ok := next(t, w)
	if !ok || name(ev) != want {
		t.Fatalf("received %v %s (open %v); want %s", ev.Type, name(ev), ok, want)
	}
}

// Against the real apiserver: a ConfigMap patched
// twice; the operator processed the first MODIFIED and came back for the
// second, then died while processing it. After a restart (new journal,
// loop and Watcher on the same file) the second MODIFIED is handed over
// again, and the first is not. A Watcher that committed each event as
// soon as it was received would restart after the second.
func TestWatchConsumer_KilledWhileProcessing_RedeliveredAfterRestart(t *testing.T) {
	ns := "crash"
	cp, ctx, kube := startNamespace(t, ns, 3*time.Minute)
	cms := kube.CoreV1().ConfigMaps(ns)
	if _, err := cms.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "a"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	patch := func(v string) string {
		t.Helper()
		cm, err := cms.Patch(ctx, "a", types.MergePatchType, []byte(`{"data":{"v":"`+v+`"}}`), metav1.PatchOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return cm.ResourceVersion
	}
	path := filepath.Join(t.TempDir(), "j.db")
	res := configMaps(ns)
	rvOf := func(ev watch.Event) string {
		if cm, ok := ev.Object.(*corev1.ConfigMap); ok {
			return cm.Name + "@" + cm.ResourceVersion + " v=" + cm.Data["v"]
		}
		return fmt.Sprintf("%v %s", ev.Type, name(ev))
	}

	// First process: ADDED a, then two patches, each received.
	j, stopLoop := runLoop(t, cp.RESTConfig(), path, res, synced)
	c, err := j.Consumers().Open("operator")
	if err != nil {
		t.Fatal(err)
	}
	w, err := adapt.WatchConsumer(c, &adapt.Options{Decode: typed})
	if err != nil {
		t.Fatal(err)
	}
	if ev, ok := next(t, w); !ok || ev.Type != watch.Added {
		t.Fatalf("first event %s (open %v); want ADDED a", rvOf(ev), ok)
	}
	rv1 := patch("1")
	ev, ok := next(t, w)
	if !ok || ev.Type != watch.Modified || rvOf(ev) != "a@"+rv1+" v=1" {
		t.Fatalf("event %s (open %v); want MODIFIED a@%s v=1", rvOf(ev), ok, rv1)
	}
	first, _ := j.Head() // the first MODIFIED's offset: processed once the receiver comes back
	rv2 := patch("2")
	ev, ok = next(t, w)
	if !ok || ev.Type != watch.Modified || rvOf(ev) != "a@"+rv2+" v=2" {
		t.Fatalf("event %s (open %v); want MODIFIED a@%s v=2", rvOf(ev), ok, rv2)
	}
	// The receiver came back for the second: the first is committed.
	// Processing the second, the process is killed: no Stop.
	if got := waitCommitted(t, j, "operator", first); got != first {
		t.Fatalf("committed %d while the second MODIFIED (offset %d) is being processed; want %d", got, first+1, first)
	}
	stopLoop()

	// Down: b is created, so a Watcher that skipped the second MODIFIED
	// gets ADDED b first instead of waiting.
	if _, err := cms.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "b"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	// Second process on the same file.
	j, stopLoop = runLoop(t, cp.RESTConfig(), path, res, resumed)
	defer stopLoop()
	w.Stop() // the dead process's goroutine; its exit commit fails on the closed journal
	<-w.Done()
	c, err = j.Consumers().Open("operator")
	if err != nil {
		t.Fatal(err)
	}
	w, err = adapt.WatchConsumer(c, &adapt.Options{Decode: typed})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { w.Stop(); <-w.Done() }()
	ev, ok = next(t, w)
	if !ok || ev.Type != watch.Modified || rvOf(ev) != "a@"+rv2+" v=2" {
		committed, _ := j.Consumers().Committed("operator")
		t.Fatalf("after the restart the first event is %s (open %v, committed %d); want MODIFIED a@%s v=2 again (the first, a@%s, not again)", rvOf(ev), ok, committed, rv2, rv1)
	}
	ev, ok = next(t, w)
	if !ok || ev.Type != watch.Added || name(ev) != "b" {
		t.Fatalf("after the redelivered MODIFIED: %s (open %v); want ADDED b", rvOf(ev), ok)
	}
}
