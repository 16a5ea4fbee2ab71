package inspect_test

import (
	"context"
	"errors"
	"testing"

	"github.com/go-logr/logr"

	"github.com/watchjournal/watchjournal/journal"
	"github.com/watchjournal/watchjournal/journal/inspect"
)

// Ensure the socket of a program that embeds the library (Serve) offers the
// consumer changes journalctl makes (POST /consumers/{name}/change): a
// Client creates, resets and deletes a consumer over the socket, and the
// journal the server holds shows each change.
func TestHandler_Client_ChangeConsumer(t *testing.T) {
	j := openJournal(t,
		journal.Event{Type: journal.Added, Key: "wj/a", UID: "u1", ResourceVersion: "1", Origin: journal.OriginWatch},
		journal.Event{Type: journal.Added, Key: "wj/b", UID: "u2", ResourceVersion: "2", Origin: journal.OriginWatch},
	)
	// Listen is what Serve calls; it returns once the socket listens.
	stop, err := inspect.Listen(inspect.SocketPath(j.Path()), inspect.Handler(j, nil, nil), logr.Discard())
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	c := inspect.NewClient(inspect.SocketPath(j.Path()))
	defer c.Close()
	ctx := context.Background()

	info, err := c.ChangeConsumer(ctx, inspect.ConsumerChange{Op: "create", Name: "ops", Head: true})
	if err != nil || info != (journal.ConsumerInfo{Name: "ops", Committed: 2}) {
		t.Fatalf("create ops --at-head = %+v, %v; want committed 2, lag 0", info, err)
	}
	info, err = c.ChangeConsumer(ctx, inspect.ConsumerChange{Op: "reset", Name: "ops", Offset: 1})
	if err != nil || info != (journal.ConsumerInfo{Name: "ops", Committed: 0, Lag: 2}) {
		t.Fatalf("reset ops to offset 1 = %+v, %v; want committed 0, lag 2", info, err)
	}
	if off, err := j.Consumers().Committed("ops"); err != nil || off != 0 {
		t.Errorf("ops committed in the served journal = %d, %v; want 0", off, err)
	}
	if _, err := c.ChangeConsumer(ctx, inspect.ConsumerChange{Op: "delete", Name: "ops"}); err != nil {
		t.Fatalf("delete ops = %v", err)
	}
	if _, err := j.Consumers().Committed("ops"); !errors.Is(err, journal.ErrNoConsumer) {
		t.Errorf("ops after delete: %v; want no such consumer", err)
	}
}
