package reconcile_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"github.com/watchjournal/watchjournal/journal"
	"github.com/watchjournal/watchjournal/reconcile"
)

// A selector the server rejects (400) is not retried: Run returns a typed
// error that carries the server's own message.
func TestLoop_RejectedRequest_StopsWithServerMessage(t *testing.T) {
	e := newEnv(t)
	e.res.FieldSelector = "data.x=1" // syntactically fine, unknown to the server
	j, err := journal.Open(e.path, &journal.Options{Resource: &e.res, NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	defer j.Close()
	l, err := reconcile.New(e.cp.RESTConfig(), j, testOptions(t))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	err = l.Run(ctx)
	if !errors.Is(err, reconcile.ErrRejected) || !apierrors.IsBadRequest(err) || !strings.Contains(err.Error(), "data.x") {
		t.Fatalf("Run with a field selector the server rejects = %v; want ErrRejected with the server's message", err)
	}
	if st, _ := j.Stats(); st.Objects != 0 || st.LastOffset != 0 {
		t.Errorf("stats after a rejected list = %+v; want nothing written", st)
	}
}

// A selector that does not parse is refused by New, before any request.
func TestNew_BadSelector(t *testing.T) {
	e := newEnv(t)
	e.res.LabelSelector = "a b c"
	j, err := journal.Open(e.path, &journal.Options{Resource: &e.res, NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	defer j.Close()
	if _, err := reconcile.New(e.cp.RESTConfig(), j, testOptions(t)); !errors.Is(err, reconcile.ErrInvalidSelector) {
		t.Fatalf("New with label selector %q = %v; want ErrInvalidSelector", e.res.LabelSelector, err)
	}
}
