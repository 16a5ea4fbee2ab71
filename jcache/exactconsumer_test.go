package jcache

import (
	"errors"
	"slices"
	"testing"
)

// consumerState: a commit while the feed resets the consumer, or of a
// point read before the tracker's reset, is refused and changes nothing;
// after the reset the next commit creates the consumer again.
func TestConsumerState_CommitDuringResetRefused(t *testing.T) {
	var c consumerState
	var calls []string
	create := func() error { calls = append(calls, "create"); return nil }
	move := func() error { calls = append(calls, "move"); return nil }
	fresh := func() bool { return false }

	if err := c.commit(fresh, create, move); err != nil || !c.exists() {
		t.Fatalf("first commit = %v, exists %v; want nil, true", err, c.exists())
	}
	var during error
	if err := c.reset(func() { during = c.commit(fresh, create, move) },
		func() error { calls = append(calls, "delete"); return nil }, func() {}); err != nil {
		t.Fatal(err)
	}
	if !errors.Is(during, errConsumerResetting) {
		t.Errorf("commit during the reset = %v; want errConsumerResetting", during)
	}
	if c.exists() {
		t.Fatal("exists after the reset; want absent")
	}
	if err := c.commit(func() bool { return true }, create, move); !errors.Is(err, errConsumerResetting) || c.exists() {
		t.Errorf("commit of a point from before the reset = %v, exists %v; want errConsumerResetting, false", err, c.exists())
	}
	if err := c.commit(fresh, create, move); err != nil || !c.exists() {
		t.Fatalf("commit after the reset = %v, exists %v; want nil, true", err, c.exists())
	}
	if err := c.commit(fresh, create, move); err != nil {
		t.Fatal(err)
	}
	if got, want := calls, []string{"create", "delete", "create", "move"}; !slices.Equal(got, want) {
		t.Errorf("calls %v; want %v", got, want)
	}
}
