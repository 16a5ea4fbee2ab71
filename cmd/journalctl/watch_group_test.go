package main

import (
	"context"
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/watchjournal/watchjournal/internal/testing/controlplane"

	"github.com/watchjournal/watchjournal/journal/inspect"
)

// watch configmaps,secrets --dir DIR, against a real apiserver: one
// process journals each resource into its own file, named after it, each
// with its own socket; the read commands read each file with --db, while
// the watch runs and after it stopped.
func TestWatch_SeveralResources_Dir(t *testing.T) {
	const ns = "wj-group"
	cp := controlplane.StartT(t, controlplane.Options{})
	kube := cp.CreateNamespaceT(t, ns)
	ctx := context.Background()
	dir := t.TempDir()
	runCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	_, stderr, code := startCLI(runCtx, "watch", "configmaps,secrets", "-n", ns, "--dir", dir,
		"--kubeconfig", cp.KubeconfigPath(), "--log-level", "info")
	cmDB, secDB := filepath.Join(dir, "configmaps.v1.db"), filepath.Join(dir, "secrets.v1.db")
	stderr.waitForWithin(t, `"db": "`+cmDB+`"`, 60*time.Second)
	stderr.waitForWithin(t, `"db": "`+secDB+`"`, 60*time.Second)

	createConfigMaps(t, kube, ns, "cm1")
	if _, err := kube.CoreV1().Secrets(ns).Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "s1"},
		StringData: map[string]string{"password": "hunter2"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	// keys returns the keys of db's events, once it holds at least one.
	keys := func(db string) []string {
		t.Helper()
		wctx, wcancel := context.WithTimeout(ctx, 60*time.Second)
		defer wcancel()
		s := inspect.NewClient(inspect.SocketPath(db))
		if _, err := s.Wait(wctx, 0); err != nil {
			t.Fatalf("waiting for an event in %s through its socket: %v; stderr %s", db, err, stderr)
		}
		out, errOut, c := runCLI("events", "--db", db, "-o", "json")
		if c != 0 {
			t.Fatalf("events --db %s: exit %d, stderr %s", db, c, errOut)
		}
		var evs []struct {
			Key string `json:"key"`
		}
		if err := json.Unmarshal([]byte(out), &evs); err != nil {
			t.Fatalf("events --db %s -o json: %q: %v", db, out, err)
		}
		var ks []string
		for _, ev := range evs {
			ks = append(ks, ev.Key)
		}
		return ks
	}
	if got := keys(cmDB); strings.Join(got, ",") != ns+"/cm1" {
		t.Errorf("configmaps.v1.db keys = %q; want [%s/cm1]", got, ns)
	}
	if got := keys(secDB); strings.Join(got, ",") != ns+"/s1" {
		t.Errorf("secrets.v1.db keys = %q; want [%s/s1]", got, ns)
	}

	cancel()
	if c := exitStatus(t, code); c != 0 {
		t.Fatalf("watch exit %d after cancel; want 0; stderr %s", c, stderr)
	}
	// After the watch: the files open on their own, the Secret without its data.
	out, errOut, c := runCLI("events", "--db", secDB, "-o", "json")
	if c != 0 || !strings.Contains(out, `"s1"`) || strings.Contains(out, "hunter2") || strings.Contains(out, "aHVudGVyMg") {
		t.Errorf("events --db %s after stop: exit %d, stdout %s, stderr %s; want s1 without its data", secDB, c, out, errOut)
	}
	out, _, _ = runCLI("stats", "--db", cmDB, "-o", "json")
	if !strings.Contains(out, `"configmaps"`) {
		t.Errorf("stats --db %s = %s; want the configmaps resource", cmDB, out)
	}
}
