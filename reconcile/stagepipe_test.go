package reconcile

import (
	"errors"
	"fmt"
	"path/filepath"
	"testing"

	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/watchjournal/watchjournal/journal"
)

// pipeRelist opens a journal of configmaps, closed with the test, and
// begins a relist of it.
func pipeRelist(t *testing.T) (*journal.Journal, *journal.Relist) {
	t.Helper()
	res := journal.Resource{GVR: schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}}
	j, err := journal.Open(filepath.Join(t.TempDir(), "j.db"), &journal.Options{Resource: &res, NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { j.Close() })
	rel, err := j.Writer().BeginRelist()
	if err != nil {
		t.Fatal(err)
	}
	return j, rel
}

func pipeBatch(from, n int) []journal.Event {
	evs := make([]journal.Event, n)
	for i := range evs {
		k := from + i
		evs[i] = journal.Event{Type: journal.Added, Key: fmt.Sprintf("ns/cm-%04d", k),
			UID: fmt.Sprintf("00000000-0000-0000-0000-%012d", k), ResourceVersion: fmt.Sprint(100 + k),
			Origin: journal.OriginRelist, Object: []byte(fmt.Sprintf(`{"metadata":{"name":"cm-%04d"}}`, k))}
	}
	return evs
}

// Batches staged through the pipe land in the journal in the order they
// were staged, each while the next is diffed: the index past the batch
// being written reads as before (the diffRange rule), and the relist
// commits all of them.
func TestStagePipe_BatchesInOrder(t *testing.T) {
	j, rel := pipeRelist(t)
	var p stagePipe
	last := ""
	for b := range 6 {
		evs := pipeBatch(b*100, 100)
		if err := p.stage(rel, evs); err != nil {
			t.Fatalf("batch %d: %v", b, err)
		}
		last = evs[len(evs)-1].Key
		// The next batch's diff, beside the write.
		if after, err := j.ScanIndex(last, 10); err != nil || len(after) != 0 {
			t.Fatalf("batch %d: index after %s while staging: %v, %v", b, last, after, err)
		}
	}
	if err := p.wait(); err != nil {
		t.Fatal(err)
	}
	if _, _, err := rel.Commit("700"); err != nil {
		t.Fatal(err)
	}
	evs, err := j.Read(1, 1000)
	if err != nil {
		t.Fatal(err)
	}
	if len(evs) != 600 {
		t.Fatalf("journal holds %d events, want 600", len(evs))
	}
	for i, e := range evs {
		if want := fmt.Sprintf("ns/cm-%04d", i); e.Key != want || e.Type != journal.Added || (i > 0 && e.Offset <= evs[i-1].Offset) {
			t.Fatalf("event %d: %s %s at %d, want ADDED %s after offset %d", i, e.Type, e.Key, e.Offset, want, evs[max(i-1, 0)].Offset)
		}
	}
	idx, err := j.ScanIndex("", 1000)
	if err != nil || len(idx) != 600 {
		t.Fatalf("index holds %d entries (%v), want 600", len(idx), err)
	}
}

// A batch that fails to stage fails a later stage call or the wait, as a
// journal error, before any commit, and no batch handed over after it is
// staged.
func TestStagePipe_ErrorSurfacesBeforeTheCommit(t *testing.T) {
	j, rel := pipeRelist(t)
	var p stagePipe
	if err := p.stage(rel, pipeBatch(0, 10)); err != nil {
		t.Fatal(err)
	}
	bad := pipeBatch(10, 10)
	bad[3].Key = "" // refused by the journal
	if err := p.stage(rel, bad); err != nil {
		t.Fatalf("the bad batch's own stage call: %v (its error belongs to a later call)", err)
	}
	var errs []error
	if err := p.stage(rel, pipeBatch(20, 10)); err != nil {
		errs = append(errs, err)
	}
	if err := p.wait(); err != nil {
		errs = append(errs, err)
	}
	var je journalError
	if len(errs) != 1 || !errors.As(errs[0], &je) {
		t.Fatalf("errors of the stage after the failed batch and of the wait: %v; want one journalError", errs)
	}
	if err := p.wait(); err != nil {
		t.Fatalf("wait after the error was returned: %v", err)
	}
	_ = rel.Abort()
	idx, err := j.ScanIndex("ns/cm-0019", 100)
	if err != nil || len(idx) != 0 {
		t.Fatalf("keys of the batch after the failure were indexed: %v (%v)", idx, err)
	}
}

// blockedRelist is a stager whose first Stage waits for
// release; it records the size of each Stage.
type blockedRelist struct {
	release chan struct{}
	stages  []int
	keys    []string
}

func (r *blockedRelist) Stage(evs []journal.Event) error {
	if len(r.stages) == 0 {
		<-r.release
	}
	r.stages = append(r.stages, len(evs))
	for _, e := range evs {
		r.keys = append(r.keys, e.Key)
	}
	return nil
}

// The batches handed over while a Stage runs are staged together by the
// next, in order, up to coalesceEvents: a slow Stage (an fsync) makes the
// transactions larger instead of holding the reader back per batch.
func TestStagePipe_CoalescesBatchesDuringAStage(t *testing.T) {
	rel := &blockedRelist{release: make(chan struct{})}
	var p stagePipe
	const batch = 100
	n := coalesceEvents/batch + 2 // the first, a full queue, one more
	for b := range n {
		if b == coalesceEvents/batch {
			close(rel.release) // this batch fills the queue: its stage call waits for the first Stage
		}
		if err := p.stage(rel, pipeBatch(b*batch, batch)); err != nil {
			t.Fatalf("batch %d: %v", b, err)
		}
	}
	if err := p.wait(); err != nil {
		t.Fatal(err)
	}
	if want := []int{batch, coalesceEvents, batch}; fmt.Sprint(rel.stages) != fmt.Sprint(want) {
		t.Fatalf("Stage sizes %v; want %v", rel.stages, want)
	}
	for i, k := range rel.keys {
		if want := fmt.Sprintf("ns/cm-%04d", i); k != want {
			t.Fatalf("staged key %d: %s; want %s", i, k, want)
		}
	}
}
