package journal_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"testing"

	"github.com/watchjournal/watchjournal/journal"
)

// shade is another version of color: "-2" after the color of the objects
// whose "n" is even, the same values for the others.
func shade(obj []byte) ([]string, error) {
	vals, err := color(nil)(obj)
	var o struct {
		N int `json:"n"`
	}
	if err != nil || json.Unmarshal(obj, &o) != nil || o.N%2 != 0 || len(vals) == 0 {
		return vals, err
	}
	return []string{vals[0] + "-2", "any"}, nil
}

// colored appends n objects wj/0000… with colors red (even n) and blue.
func colored(t *testing.T, j *journal.Journal, n int) {
	t.Helper()
	var evs []journal.Event
	for i := range n {
		c := "blue"
		if i%2 == 0 {
			c = "red"
		}
		evs = append(evs, obj(journal.Added, fmt.Sprintf("wj/%04d", i), fmt.Sprint("u", i), "1",
			fmt.Sprintf(`{"n":%d,"color":%q}`, i, c)))
	}
	appendEvents(t, j, "1", evs...)
}

// Ensure that registering another function under a recorded name leaves
// the index pending (lookups fail with ErrIndexPending, which matches
// ErrNoIndex) until its reindex, which rewrites exactly the keys
// whose values differ, in one write transaction per batch that has some,
// each at most a batch, and then answers with the new function's values.
func TestIndexes_Reindex_ChangedFunctionRewritesWhatDiffers(t *testing.T) {
	path := filepath.Join(t.TempDir(), "j.db")
	j := open(t, path)
	const n = 3*journal.ReindexBatch + 10
	colored(t, j, n)
	if st := withIndex(t, j, nil); st.Keys != n || st.Rewritten != n || st.Transactions != 4 || st.MaxRewrite != journal.ReindexBatch {
		t.Fatalf("first reindex = %+v; want %d keys, all rewritten, in 4 transactions of at most %d", st, n, journal.ReindexBatch)
	}
	if err := j.Close(); err != nil {
		t.Fatal(err)
	}

	j = open(t, path)
	if err := j.Indexes().Add(map[string]journal.IndexFunc{"color": shade}); err != nil {
		t.Fatal(err)
	}
	if _, err := j.Indexes().Lookup("color", "red"); !errors.Is(err, journal.ErrIndexPending) || !errors.Is(err, journal.ErrNoIndex) {
		t.Fatalf("Indexes.Lookup before the reindex = %v; want ErrIndexPending, matching ErrNoIndex", err)
	}
	st, err := j.Indexes().Reindex(context.Background(), []string{"color"})
	if err != nil || st.Keys != n || st.Rewritten != (n+1)/2 || st.Transactions != 4 || st.MaxRewrite != journal.ReindexBatch/2 {
		t.Fatalf("Reindex of the changed function = %+v, %v; want %d keys, the %d even ones rewritten in 4 transactions", st, err, n, (n+1)/2)
	}
	if got, err := j.Indexes().Lookup("color", "red"); err != nil || len(got) != 0 {
		t.Fatalf("Indexes.Lookup(red) = %d keys, %v; want none (every red object is red-2 now)", len(got), err)
	}
	if got, err := j.Indexes().Lookup("color", "red-2"); err != nil || len(got) != (n+1)/2 {
		t.Fatalf("Indexes.Lookup(red-2) = %d keys, %v; want %d", len(got), err, (n+1)/2)
	}
	if got, err := j.Indexes().Lookup("color", "any"); err != nil || len(got) != n {
		t.Fatalf("Indexes.Lookup(any) = %d keys, %v; want %d", len(got), err, n)
	}
	if r, err := j.Check(); err != nil || !r.OK() {
		t.Fatalf("Check after the reindex = %+v, %v; want sound", r, err)
	}
}

// Ensure that writes made while a reindex runs leave the index
// right: one to a key the reindex has read already and one to a key
// it has not, both while it is paused inside the function (in no
// transaction), and a deletion.
func TestIndexes_Reindex_WritesDuringReindex(t *testing.T) {
	path := filepath.Join(t.TempDir(), "j.db")
	j := open(t, path)
	const n = 2*journal.ReindexBatch + 10
	colored(t, j, n)
	withIndex(t, j, nil)
	if err := j.Close(); err != nil {
		t.Fatal(err)
	}

	j = open(t, path)
	paused, resume := make(chan struct{}), make(chan struct{})
	gate := fmt.Sprintf(`{"n":%d,`, journal.ReindexBatch+5) // in the second batch
	first := true
	fn := func(b []byte) ([]string, error) {
		if first && len(b) > len(gate) && string(b[:len(gate)]) == gate {
			first = false
			close(paused)
			<-resume
		}
		return shade(b)
	}
	if err := j.Indexes().Add(map[string]journal.IndexFunc{"color": fn}); err != nil {
		t.Fatal(err)
	}
	type result struct {
		st  journal.ReindexStats
		err error
	}
	done := make(chan result, 1)
	go func() {
		st, err := j.Indexes().Reindex(context.Background(), []string{"color"})
		done <- result{st, err}
	}()
	<-paused
	// wj/0002 was reindexed (first batch), wj/1030 is not read yet; wj/0004
	// goes.
	appendEvents(t, j, "2",
		obj(journal.Modified, "wj/0002", "u2", "2", `{"n":2,"color":"green"}`),
		obj(journal.Modified, fmt.Sprintf("wj/%04d", n-4), fmt.Sprint("u", n-4), "2", fmt.Sprintf(`{"n":%d,"color":"green"}`, n-4)),
		ev(journal.Deleted, "wj/0004", "u4", "2"))
	if _, err := j.Indexes().Lookup("color", "green-2"); !errors.Is(err, journal.ErrIndexPending) {
		t.Fatalf("Indexes.Lookup during the reindex = %v; want ErrIndexPending", err)
	}
	close(resume)
	r := <-done
	if r.err != nil {
		t.Fatalf("Reindex = %+v, %v", r.st, r.err)
	}
	want := []string{"wj/0002", fmt.Sprintf("wj/%04d", n-4)}
	if got, err := j.Indexes().Lookup("color", "green-2"); err != nil || !slices.Equal(got, want) {
		t.Fatalf("Indexes.Lookup(green-2) = %q, %v; want %q", got, err, want)
	}
	if got, err := j.Indexes().Lookup("color", "red-2"); err != nil || len(got) != (n+1)/2-3 || slices.Contains(got, "wj/0004") {
		t.Fatalf("Indexes.Lookup(red-2) = %d keys (wj/0004 among them: %v), %v; want %d, without wj/0004", len(got), slices.Contains(got, "wj/0004"), err, (n+1)/2-3)
	}
	if rep, err := j.Check(); err != nil || !rep.OK() {
		t.Fatalf("Check after the reindex = %+v, %v; want sound", rep, err)
	}
}

// Ensure that a reindex stopped by its context leaves the index
// pending, and a crash's file (the mark persisted) is pending for a
// reader until the next reindex.
func TestIndexes_Reindex_StoppedStaysPending(t *testing.T) {
	path := filepath.Join(t.TempDir(), "j.db")
	j := open(t, path)
	colored(t, j, 10)
	keepObjects(t, j)
	if err := j.Indexes().Add(map[string]journal.IndexFunc{"color": color(nil)}); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := j.Indexes().Reindex(ctx, []string{"color"}); !errors.Is(err, context.Canceled) {
		t.Fatalf("Reindex with a cancelled context = %v; want context.Canceled", err)
	}
	if err := j.Close(); err != nil {
		t.Fatal(err)
	}
	ro, err := journal.Open(path, &journal.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer ro.Close()
	if _, err := ro.Indexes().Values("color"); !errors.Is(err, journal.ErrIndexPending) {
		t.Fatalf("Indexes.Values of an index never reindexed, read-only = %v; want ErrIndexPending", err)
	}
	if _, err := ro.Indexes().Reindex(context.Background(), []string{"color"}); !errors.Is(err, journal.ErrReadOnly) {
		t.Fatalf("Reindex read-only = %v; want ErrReadOnly", err)
	}
}
