package adapt_test

// The reason of a journal event reaches a Watcher's reader (Events) and a
// handler (DeleteReasonHandler); ResultChan and plain handlers see what
// they saw before.

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/tools/cache"

	"github.com/watchjournal/watchjournal/journal"
	"github.com/watchjournal/watchjournal/journal/adapt"
)

// reasonJournal holds ADDED a, DELETED a (left-selector), ADDED a
// (moved), DELETED a (gone, a tombstone from a relist).
func reasonJournal(t *testing.T) *journal.Journal {
	res := journal.Resource{GVR: schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}, Namespace: "demo",
		Kind: "ConfigMap", APIVersion: "v1"}
	j, err := journal.Open(filepath.Join(t.TempDir(), "j.db"), &journal.Options{Resource: &res, NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = j.Close() })
	obj := []byte(`{"kind":"ConfigMap","apiVersion":"v1","metadata":{"name":"a","namespace":"demo","uid":"u-1","resourceVersion":"10"}}`)
	if err := j.Writer().Update(func(tx *journal.Tx) error {
		for _, e := range []journal.Event{
			{Type: journal.Added, Key: "demo/a", UID: "u-1", ResourceVersion: "10", Object: obj, Origin: journal.OriginWatch},
			{Type: journal.Deleted, Key: "demo/a", UID: "u-1", ResourceVersion: "11", Object: obj, Origin: journal.OriginWatch, Reason: journal.ReasonLeftSelector},
			{Type: journal.Added, Key: "demo/a", UID: "u-1", ResourceVersion: "12", Object: obj, Origin: journal.OriginRelist, Reason: journal.ReasonMoved},
			{Type: journal.Deleted, Key: "demo/a", UID: "u-1", ResourceVersion: "12", Origin: journal.OriginRelist, Reason: journal.ReasonGone},
		} {
			if _, err := tx.Append(&e); err != nil {
				return err
			}
		}
		return tx.SetResourceVersion("12")
	}); err != nil {
		t.Fatal(err)
	}
	return j
}

func TestWatcher_Events_CarryReasons(t *testing.T) {
	j := reasonJournal(t)
	w, err := adapt.NewWatcher(j, 1, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	var got []string
	for len(got) < 4 {
		select {
		case e := <-w.Events():
			got = append(got, fmt.Sprintf("%d %s %s %v", e.Offset, e.Type, e.Reason, e.IsDeletion()))
		case <-time.After(10 * time.Second):
			t.Fatalf("got %q, then nothing", got)
		}
	}
	want := []string{"1 ADDED  false", "2 DELETED left-selector false", "3 ADDED moved false", "4 DELETED gone true"}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("Events = %q; want %q", got, want)
	}

	// ResultChan is unchanged: the same four events as watch.Events.
	w2, _ := adapt.NewWatcher(j, 1, nil)
	defer w2.Stop()
	for i := 0; i < 4; i++ {
		select {
		case e := <-w2.ResultChan():
			if string(e.Type) != []string{"ADDED", "DELETED", "ADDED", "DELETED"}[i] {
				t.Errorf("ResultChan event %d: %s", i+1, e.Type)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("ResultChan: %d events, then nothing", i)
		}
	}
}

// reasonHandler records the deletes it gets, with their reasons.
type reasonHandler struct {
	cache.ResourceEventHandlerFuncs
	got []string
}

func (h *reasonHandler) OnDeleteWithReason(obj any, r journal.Reason) {
	_, tombstone := obj.(cache.DeletedFinalStateUnknown)
	h.got = append(h.got, fmt.Sprintf("%s tombstone=%v", r, tombstone))
}

func TestHandle_DeleteReasonHandler(t *testing.T) {
	j := reasonJournal(t)
	c, err := j.Consumers().Open("h")
	if err != nil {
		t.Fatal(err)
	}
	h := &reasonHandler{}
	h.DeleteFunc = func(any) { t.Error("OnDelete called on a DeleteReasonHandler") }
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- adapt.Handle(ctx, c, h, nil) }()
	deadline := time.Now().Add(10 * time.Second)
	for off, _ := c.Committed(); off < 4; off, _ = c.Committed() {
		if time.Now().After(deadline) {
			t.Fatalf("committed %d; want 4", off)
		}
		time.Sleep(5 * time.Millisecond) // Handle commits from its own goroutine
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if want := []string{"left-selector tombstone=false", "gone tombstone=true"}; fmt.Sprint(h.got) != fmt.Sprint(want) {
		t.Errorf("OnDeleteWithReason calls %q; want %q", h.got, want)
	}
}
