package adapt_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"k8s.io/client-go/tools/cache"

	"github.com/watchjournal/watchjournal/journal"
	"github.com/watchjournal/watchjournal/journal/adapt"
)

// One convention (journal/journal.go, "Conventions"): Handle, like
// reconcile.Loop.Run and controller-runtime's Start, returns nil when its
// context ends (it returned ctx.Err()), and a closed journal is ErrClosed.
func TestHandle_NilOnCancel_ErrClosedOnClose(t *testing.T) {
	j, cleanup := demoJournal()
	defer cleanup()
	c, err := j.Consumers().Open("h")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- adapt.Handle(ctx, c, cache.ResourceEventHandlerFuncs{}, nil) }()
	for off, _ := c.Committed(); off < 3; off, _ = c.Committed() {
		time.Sleep(5 * time.Millisecond) // Handle commits from its own goroutine
	}
	cancel()
	if err := <-done; err != nil {
		t.Errorf("Handle after cancel = %v; want nil", err)
	}

	c2, _ := j.Consumers().Open("h2")
	go func() { done <- adapt.Handle(context.Background(), c2, cache.ResourceEventHandlerFuncs{}, nil) }()
	for off, _ := c2.Committed(); off < 3; off, _ = c2.Committed() {
		time.Sleep(5 * time.Millisecond)
	}
	_ = j.Close()
	if err := <-done; !errors.Is(err, journal.ErrClosed) {
		t.Errorf("Handle across Close = %v; want ErrClosed", err)
	}
}
