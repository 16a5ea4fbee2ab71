package journal

// Helpers shared by the journal package's internal tests.

import "testing"

// readAll reads j's whole journal from offset 1, page by page, and returns
// its events in offset order; a trimmed journal fails the test.
func readAll(t *testing.T, j *Journal) []Event {
	t.Helper()
	var all []Event
	for from := uint64(1); ; {
		evs, err := j.Read(from, 0)
		if err != nil {
			t.Fatal(err)
		}
		if len(evs) == 0 {
			return all
		}
		all = append(all, evs...)
		from = evs[len(evs)-1].Offset + 1
	}
}

// appendWatch appends evs with Origin watch in one transaction and, unless
// rv is empty, sets the resourceVersion to rv in it.
func appendWatch(t *testing.T, j *Journal, rv string, evs ...Event) {
	t.Helper()
	if err := j.Writer().Update(func(tx *Tx) error {
		for _, e := range evs {
			e.Origin = OriginWatch
			if _, err := tx.Append(&e); err != nil {
				return err
			}
		}
		if rv == "" {
			return nil
		}
		return tx.SetResourceVersion(rv)
	}); err != nil {
		t.Fatal(err)
	}
}
