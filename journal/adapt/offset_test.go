package adapt_test

import (
	"testing"

	"k8s.io/apimachinery/pkg/watch"

	"github.com/watchjournal/watchjournal/journal"
	"github.com/watchjournal/watchjournal/journal/adapt"
)

// Offset 0 means one thing, as in journal.Journal.Read: the first retained
// offset. Only adapt.FromNow starts after the head.
func TestNewWatcher_ZeroIsFirstRetained_FromNowIsAfterHead(t *testing.T) {
	j, cleanup := demoJournal() // offsets 1-3: ADDED, MODIFIED, DELETED
	defer cleanup()

	w, err := adapt.NewWatcher(j, 0, nil)
	if err != nil {
		t.Fatal(err)
	}
	ev := <-w.Events()
	w.Stop()
	if ev.Offset != 1 || ev.Type != watch.Added {
		t.Errorf("NewWatcher(j, 0): first event = %s at offset %d; want ADDED at offset 1 (the first retained)", ev.Type, ev.Offset)
	}

	now, err := adapt.NewWatcher(j, adapt.FromNow, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer now.Stop()
	if err := j.Writer().Update(func(tx *journal.Tx) error {
		_, err := tx.Append(&journal.Event{Type: journal.Added, Key: "demo/b", UID: "u-2", ResourceVersion: "13",
			Object: []byte(`{"kind":"ConfigMap","apiVersion":"v1","metadata":{"name":"b","namespace":"demo","uid":"u-2","resourceVersion":"13"}}`),
			Origin: journal.OriginWatch})
		return err
	}); err != nil {
		t.Fatal(err)
	}
	ev = <-now.Events()
	if ev.Offset != 4 || ev.Type != watch.Added {
		t.Errorf("NewWatcher(j, FromNow): first event = %s at offset %d; want ADDED at offset 4 (appended after it started)", ev.Type, ev.Offset)
	}
}
