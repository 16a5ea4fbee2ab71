package jcache_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	crcache "sigs.k8s.io/controller-runtime/pkg/cache"

	"github.com/watchjournal/watchjournal/jcache"
	"github.com/watchjournal/watchjournal/journal/inspect"
)

// TestCache_DirLongerThanASocketPath: a cache whose Dir is longer than a
// unix socket path can hold serves each file's inspect socket without an
// error, and a client finds it through inspect.SocketPath of the file.
func TestCache_DirLongerThanASocketPath(t *testing.T) {
	cp, kube, ns := setup(t)
	createCM(t, kube, ns, "a", nil, nil)
	run := t.TempDir()
	if err := os.Chmod(run, 0o700); err != nil {
		t.Fatal(err)
	}
	t.Setenv("XDG_RUNTIME_DIR", run)
	dir := filepath.Join(t.TempDir(), strings.Repeat("d", 60), strings.Repeat("e", 60))
	var logged logLines
	r := startCache(t, jcache.NewFunc(jcache.Options{Dir: dir, NoSync: true, Logger: logged.logger()}), crcache.Options{}, cp)
	defer r.stop()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	getInformer(t, ctx, r.c, &corev1.ConfigMap{})
	files, _ := filepath.Glob(filepath.Join(dir, "configmaps.v1.*.db"))
	if len(files) != 1 {
		t.Fatalf("files %v, want one configmaps file", files)
	}
	c := inspect.NewClient(inspect.SocketPath(files[0]))
	defer c.Close()
	for {
		_, err := c.Head(ctx)
		if err == nil {
			break
		}
		if !errors.Is(err, inspect.ErrNoServer) || ctx.Err() != nil {
			t.Fatalf("Head through %s = %v; logged %q", c.Socket(), err, logged.all())
		}
		time.Sleep(10 * time.Millisecond) // until the socket listens
	}
	for _, l := range logged.all() {
		if strings.Contains(l, `"error"=`) {
			t.Errorf("logged an error: %s", l)
		}
	}
}
