package main

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// waitForCount waits until the output contains s at least n times; it
// fails the test after 5 s with the output.
func (o *output) waitForCount(t *testing.T, s string, n int) {
	t.Helper()
	timeout := time.NewTimer(5 * time.Second)
	defer timeout.Stop()
	for {
		o.mu.Lock()
		has, ch := strings.Count(o.buf.String(), s) >= n, o.changed
		o.mu.Unlock()
		if has {
			return
		}
		select {
		case <-ch:
		case <-timeout.C:
			t.Fatalf("output %q; want %q at least %d times", o.String(), s, n)
		}
	}
}

// With the apiserver unreachable from the start, watch keeps saying that
// it retries and why, not only once (issue 13).
func TestWatch_StillRetrying_Unreachable(t *testing.T) {
	oldEvery, oldMax := stillRetryingEvery, maxDiscoveryBackoff
	stillRetryingEvery, maxDiscoveryBackoff = 300*time.Millisecond, 200*time.Millisecond
	t.Cleanup(func() { stillRetryingEvery, maxDiscoveryBackoff = oldEvery, oldMax })
	dir := tempDir(t)
	kc := writeKubeconfig(t, dir, "https://127.0.0.1:1")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	_, stderr, code := startCLI(ctx, "watch", "configmaps", "--db", filepath.Join(dir, "cm.db"), "--kubeconfig", kc)
	stderr.waitForCount(t, "still retrying: ", 2)
	cancel()
	if c := exitStatus(t, code); c != 0 {
		t.Errorf("exit %d after interrupt; want 0; stderr:\n%s", c, stderr)
	}
	for _, line := range strings.Split(stderr.String(), "\n") {
		if strings.Contains(line, "still retrying: ") && (!strings.Contains(line, "connection refused") || !strings.Contains(line, ", since ") || !strings.Contains(line, " backoffs")) {
			t.Errorf("still retrying line without the reason, since when or backoffs: %s", line)
		}
	}
}
