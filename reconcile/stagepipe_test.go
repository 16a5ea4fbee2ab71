package reconcile

import (
	"errors"
	"fmt"
	"path/filepath"
	"testing"

	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/watchjournal/watchjournal/journal"
)

func pipeJournal(t *testing.T) *journal.Journal {
	t.Helper()
	res := journal.Resource{GVR: schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}}
	j, err := journal.Open(filepath.Join(t.TempDir(), "j.db"), &journal.Options{Resource: &res, NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { j.Close() })
	return j
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
	j := pipeJournal(t)
	rel, err := j.Writer().BeginRelist()
	if err != nil {
		t.Fatal(err)
	}
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

// A batch that fails to stage fails the next stage call (or wait), as a
// journal error, and the batch after it is not started.
func TestStagePipe_ErrorSurfacesBeforeTheNextBatch(t *testing.T) {
	j := pipeJournal(t)
	rel, err := j.Writer().BeginRelist()
	if err != nil {
		t.Fatal(err)
	}
	var p stagePipe
	if err := p.stage(rel, pipeBatch(0, 10)); err != nil {
		t.Fatal(err)
	}
	bad := pipeBatch(10, 10)
	bad[3].Key = "" // refused by the journal
	if err := p.stage(rel, bad); err != nil {
		t.Fatalf("the bad batch's own stage call: %v (its error belongs to the next call)", err)
	}
	err = p.stage(rel, pipeBatch(20, 10))
	var je journalError
	if !errors.As(err, &je) {
		t.Fatalf("stage after a failed batch: %v (%T), want a journalError", err, err)
	}
	if p.busy {
		t.Fatal("the batch after the failed one was started")
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
