package main

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr/testr"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/watchjournal/watchjournal/internal/testing/controlplane"
	"github.com/watchjournal/watchjournal/journal"
	"github.com/watchjournal/watchjournal/reconcile"
)

// waitForCount waits until the output contains s at least n times; it
// fails the test after 5 s with the output.
func (o *output) waitForCount(t *testing.T, s string, n int) {
	t.Helper()
	o.waitMatch(t, 5*time.Second, func(out string) bool { return strings.Count(out, s) >= n }, fmt.Sprintf("want %q at least %d times", s, n))
}

// With the apiserver unreachable from the start, watch keeps saying that
// it retries and why, not only once.
func TestWatch_StillRetrying_Unreachable(t *testing.T) {
	dir := tempDir(t)
	kc := writeKubeconfig(t, dir, "https://127.0.0.1:1")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	conf := tuned(func(c *settings) { c.stillRetryingEvery, c.discovery.max = 300*time.Millisecond, 200*time.Millisecond })
	_, stderr, code := startCLIWith(ctx, conf, "watch", "configmaps", "--db", filepath.Join(dir, "cm.db"), "--kubeconfig", kc)
	stderr.waitForCount(t, "still retrying: ", 2)
	stopCLI(t, cancel, code, stderr)
	for _, line := range strings.Split(stderr.String(), "\n") {
		if strings.Contains(line, "still retrying: ") && (!strings.Contains(line, "connection refused") || !strings.Contains(line, ", since ") || !strings.Contains(line, " backoffs")) {
			t.Errorf("still retrying line without the reason, since when or backoffs: %s", line)
		}
	}
}

// With the apiserver cut off after the watch synced, reportRetrying keeps
// saying that the loop retries and why, and says "recovered" once the
// link heals.
func TestReportRetrying_Loop(t *testing.T) {
	cp := controlplane.StartT(t, controlplane.Options{})
	p, err := controlplane.NewProxy(cp.APIServerAddr())
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	res := journal.Resource{GVR: schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}, Namespace: "default"}
	j, err := journal.Open(filepath.Join(tempDir(t), "cm.db"), &journal.Options{Resource: &res, NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	defer j.Close()
	loop, err := reconcile.New(cp.ProxiedRESTConfig(p), j, reconcile.Options{
		MinBackoff: 50 * time.Millisecond, MaxBackoff: 200 * time.Millisecond, Logger: testr.New(t)})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	ran, reported := make(chan error, 1), make(chan struct{})
	defer func() { cancel(); <-ran; <-reported }()
	go func() { ran <- loop.Run(ctx) }()
	wctx, wcancel := context.WithTimeout(ctx, 60*time.Second)
	defer wcancel()
	if err := loop.WaitForSync(wctx); err != nil {
		t.Fatalf("WaitForSync: %v; status %+v", err, loop.Status())
	}
	out := newOutput()
	log, err := newLogger(out, "info", 0)
	if err != nil {
		t.Fatal(err)
	}
	go func() { defer close(reported); reportRetrying(ctx, loop, log, 300*time.Millisecond) }()
	p.Cut()
	out.waitForCount(t, "still retrying: ", 2)
	for _, line := range strings.Split(out.String(), "\n") {
		if strings.Contains(line, "still retrying: ") && (strings.Contains(line, "still retrying: <nil>") || !strings.Contains(line, ", since ") || !strings.Contains(line, " backoffs")) {
			t.Errorf("still retrying line without the reason, since when or backoffs: %s", line)
		}
	}
	p.Heal()
	out.waitFor(t, "recovered")
}
