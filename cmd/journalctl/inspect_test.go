package main

import (
	"context"
	"fmt"
	"github.com/go-logr/logr/testr"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/watchjournal/watchjournal/internal/testing/controlplane"
	"github.com/watchjournal/watchjournal/journal"
	"github.com/watchjournal/watchjournal/journal/inspect"
	"github.com/watchjournal/watchjournal/reconcile"
)

// Ensure a program that embeds the library (journal + reconcile loop, here
// in-process against a real apiserver) and calls inspect.Serve can be
// inspected while it holds the file's lock: journalctl stats, events and
// index read through the socket, which is 0600; without Serve, stats
// fails (the file is locked).
func TestInspect_EmbeddedLoop(t *testing.T) {
	ns := "embedded"
	cp := controlplane.StartT(t, controlplane.Options{})
	kube := cp.CreateNamespaceT(t, ns)
	createConfigMaps(t, kube, ns, "cm0", "cm1", "cm2")
	ctx := context.Background()
	path := filepath.Join(tempDir(t), "operator.db")
	res := journal.Resource{GVR: schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}, Namespace: ns}
	j, err := journal.Open(path, &journal.Options{Resource: &res, NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	defer j.Close()
	loop, err := reconcile.New(cp.RESTConfig(), j, reconcile.Options{PageSize: 2, Logger: testr.New(t)})
	if err != nil {
		t.Fatal(err)
	}
	runCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	ran := make(chan error, 1)
	go func() { ran <- loop.Run(runCtx) }()
	defer func() { cancel(); <-ran }()
	wctx, wcancel := context.WithTimeout(ctx, 60*time.Second)
	defer wcancel()
	if err := loop.WaitForSync(wctx); err != nil {
		t.Fatalf("WaitForSync: %v; status %+v", err, loop.Status())
	}

	// Without the socket, the lock keeps journalctl out.
	if _, stderr, code := runCLI("stats", "--db", path); code == 0 {
		t.Fatalf("stats without a socket: exit 0; want a failure (the embedding program holds the lock); stderr %q", stderr)
	}

	srvCtx, stopServe := context.WithCancel(ctx)
	served := make(chan error, 1)
	go func() { served <- inspect.Serve(srvCtx, j, loop, nil) }()
	sock := inspect.SocketPath(path)
	deadline := time.Now().Add(10 * time.Second)
	for {
		if fi, err := os.Lstat(sock); err == nil {
			if fi.Mode().Perm() != 0o600 {
				t.Errorf("socket mode %v; want 0600", fi.Mode())
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("socket %s not created", sock)
		}
		time.Sleep(10 * time.Millisecond) // the socket file has no event to wait on
	}

	stdout, stderr, code := runCLI("stats", "--db", path)
	for _, want := range []string{"objects", "3", "phase", "Watching", "lists"} {
		if code != 0 || !strings.Contains(stdout, want) {
			t.Errorf("stats through the socket: exit %d, stdout\n%s\nstderr %q; want %q", code, stdout, stderr, want)
		}
	}
	stdout, stderr, code = runCLI("events", "--db", path)
	for i := range 3 {
		if want := fmt.Sprintf("%s/cm%d", ns, i); code != 0 || !strings.Contains(stdout, want) {
			t.Errorf("events through the socket: exit %d, stdout\n%s\nstderr %q; want %s", code, stdout, stderr, want)
		}
	}
	stdout, stderr, code = runCLI("index", "--db", path)
	if code != 0 || strings.Count(stdout, ns+"/cm") != 3 {
		t.Errorf("index through the socket: exit %d, stdout\n%s\nstderr %q; want the 3 keys", code, stdout, stderr)
	}

	stopServe()
	if err := <-served; err != nil {
		t.Errorf("Serve = %v; want nil after its context ends", err)
	}
	if _, err := os.Lstat(sock); !os.IsNotExist(err) {
		t.Errorf("socket after Serve returned: %v; want it removed", err)
	}
}
