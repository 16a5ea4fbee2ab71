package inspect_test

import (
	"maps"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/watchjournal/watchjournal/journal"
	"github.com/watchjournal/watchjournal/journal/inspect"
)

// Ensure a consumer deleted while its commit is under way (after the
// request arrived, before the commit's transaction) is refused with 404,
// no such consumer, and stays deleted: the check and the commit are one
// transaction, so the commit never registers the consumer again.
func TestCommit_ConsumerDeletedMeanwhile_NotRecreated(t *testing.T) {
	j := openJournal(t,
		journal.Event{Type: journal.Added, Key: "wj/a", UID: "u1", ResourceVersion: "1", Origin: journal.OriginWatch},
		journal.Event{Type: journal.Modified, Key: "wj/a", UID: "u1", ResourceVersion: "2", PrevResourceVersion: "1", Origin: journal.OriginWatch},
	)
	if _, err := j.Consumers().Open("billing"); err != nil {
		t.Fatal(err)
	}
	deleted := false
	o := inspect.WithBeforeCommit(inspect.Options{}, func(j *journal.Journal) {
		if err := j.Consumers().Delete("billing"); err != nil {
			t.Error(err)
		}
		deleted = true
	})
	h := inspect.Handler(j, nil, &o)

	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, "/consumers/billing/commit?offset=2", nil))
	if !deleted {
		t.Fatal("the commit never reached its transaction (the hook did not run)")
	}
	if rec.Code != http.StatusNotFound || !strings.Contains(rec.Body.String(), `no such consumer: \"billing\"`) {
		t.Errorf("commit of a consumer deleted meanwhile = %d %s; want 404, no such consumer", rec.Code, rec.Body)
	}
	cs, err := j.Consumers().List()
	if err != nil {
		t.Fatal(err)
	}
	if len(cs) != 0 {
		t.Errorf("consumers after the commit = %+v; want none: the deleted consumer was registered again", cs)
	}
}

// Ensure two handlers of one process keep their own hooks while both
// serve commits at once: the one built with a hook runs it for each of its
// commits, on its own journal; the one built without runs none, and every
// commit of both lands.
func TestCommit_HooksPerHandler(t *testing.T) {
	evs := []journal.Event{
		{Type: journal.Added, Key: "wj/a", UID: "u1", ResourceVersion: "1", Origin: journal.OriginWatch},
		{Type: journal.Modified, Key: "wj/a", UID: "u1", ResourceVersion: "2", PrevResourceVersion: "1", Origin: journal.OriginWatch},
	}
	hookedJ, plainJ := openJournal(t, evs...), openJournal(t, evs...)
	for _, j := range []*journal.Journal{hookedJ, plainJ} {
		if _, err := j.Consumers().Open("billing"); err != nil {
			t.Fatal(err)
		}
	}
	var mu sync.Mutex
	ran := map[string]int{} // hook runs by the path of the journal it was given
	o := inspect.WithBeforeCommit(inspect.Options{}, func(j *journal.Journal) {
		mu.Lock()
		ran[j.Path()]++
		mu.Unlock()
	})
	hooked, plain := inspect.Handler(hookedJ, nil, &o), inspect.Handler(plainJ, nil, nil)
	const commits = 50
	var wg sync.WaitGroup
	codes := make(chan int, 2*commits)
	for _, h := range []http.Handler{hooked, plain} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < commits; i++ {
				rec := httptest.NewRecorder()
				h.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, "/consumers/billing/commit?offset=2", nil))
				codes <- rec.Code
			}
		}()
	}
	wg.Wait()
	close(codes)
	for c := range codes {
		if c != http.StatusOK {
			t.Fatalf("a commit answered %d; want 200", c)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if want := map[string]int{hookedJ.Path(): commits}; !maps.Equal(ran, want) {
		t.Errorf("hook runs by journal = %v; want %v (only the hooked handler's, once per commit)", ran, want)
	}
}
