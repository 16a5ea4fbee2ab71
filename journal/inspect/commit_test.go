package inspect_test

import (
	"net/http"
	"net/http/httptest"
	"strings"
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
	h := inspect.Handler(j, nil, nil)
	deleted := false
	defer inspect.SetBeforeCommit(func() {
		if err := j.Consumers().Delete("billing"); err != nil {
			t.Error(err)
		}
		deleted = true
	})()

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
