package main

import (
	"bytes"
	"context"
	"encoding/base64"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/watchjournal/watchjournal/internal/testing/controlplane"
	"github.com/watchjournal/watchjournal/journal"
	"github.com/watchjournal/watchjournal/journal/inspect"
)

// watch secrets --secret-payloads --seal-key-file, against a real
// apiserver: the file holds neither a Secret's value nor its base64;
// events shows the data with --seal-key-file, and without it fails naming
// the key and the flag. --secret-payloads without a key is refused.
func TestWatch_SecretsSealed(t *testing.T) {
	const ns = "wj-sealed"
	cp := controlplane.StartT(t, controlplane.Options{})
	kube := cp.CreateNamespaceT(t, ns)
	ctx := context.Background()
	dir := t.TempDir()
	db := filepath.Join(dir, "secrets.db")
	key := bytes.Repeat([]byte{7}, journal.KeySize)
	keyFile := filepath.Join(dir, "key")
	if err := os.WriteFile(keyFile, []byte(base64.StdEncoding.EncodeToString(key)+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}

	_, errOut, c := runCLI("watch", "secrets", "-n", ns, "--db", filepath.Join(dir, "nokey.db"), "--secret-payloads",
		"--kubeconfig", cp.KubeconfigPath())
	if c == 0 || !strings.Contains(errOut, "--seal-key-file") {
		t.Errorf("watch --secret-payloads without a key: exit %d, stderr %s; want an error naming --seal-key-file", c, errOut)
	}

	const value = "hunter2-sealed-cli"
	if _, err := kube.CoreV1().Secrets(ns).Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "s1"},
		StringData: map[string]string{"password": value}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	runCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	_, stderr, code := startCLI(runCtx, "watch", "secrets", "-n", ns, "--db", db, "--secret-payloads",
		"--seal-key-file", keyFile, "--kubeconfig", cp.KubeconfigPath())
	stderr.waitForWithin(t, `"db": "`+db+`"`, 60*time.Second) // the socket is served
	wctx, wcancel := context.WithTimeout(ctx, 60*time.Second)
	defer wcancel()
	if _, err := inspect.NewClient(inspect.SocketPath(db)).Wait(wctx, 0); err != nil {
		t.Fatalf("waiting for the Secret's event: %v; stderr %s", err, stderr)
	}
	cancel()
	if c := exitStatus(t, code); c != 0 {
		t.Fatalf("watch exit %d after cancel; want 0; stderr %s", c, stderr)
	}
	b, err := os.ReadFile(db)
	if err != nil {
		t.Fatal(err)
	}
	b64 := base64.StdEncoding.EncodeToString([]byte(value))
	if bytes.Contains(b, []byte(value)) || bytes.Contains(b, []byte(b64)) {
		t.Fatalf("%s holds the Secret's value in plaintext", db)
	}
	out, errOut, c := runCLI("events", "--db", db, "-o", "json", "--seal-key-file", keyFile)
	if c != 0 || !strings.Contains(out, b64) {
		t.Errorf("events --seal-key-file: exit %d, stdout %s, stderr %s; want the Secret's data", c, out, errOut)
	}
	out, errOut, c = runCLI("events", "--db", db, "-o", "json")
	if c == 0 || strings.Contains(out, b64) || !strings.Contains(errOut, journal.KeyID(key)) || !strings.Contains(errOut, "--seal-key-file") {
		t.Errorf("events without the key: exit %d, stdout %s, stderr %s; want an error naming key %s and --seal-key-file", c, out, errOut, journal.KeyID(key))
	}
	if out, _, c := runCLI("index", "--db", db); c != 0 || !strings.Contains(out, "s1") {
		t.Errorf("index without the key: exit %d, stdout %s; want s1's entry", c, out)
	}
	if out, _, c := runCLI("check", "--db", db); c != 0 || !strings.Contains(out, "key "+journal.KeyID(key)+": ") {
		t.Errorf("check without the key: exit %d, stdout %s; want a sound file and its sealed objects under key %s", c, out, journal.KeyID(key))
	}
}
