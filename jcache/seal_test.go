package jcache_test

// Secrets in a cache's files, against the real kube-apiserver: with a key
// (Options.KeyFiles, as a mounted Secret holds it) a typed Secret's data
// is read through Get and an informer handler while the files hold it
// only sealed (secrets_test.go: without a key).

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/base64"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/scheme"
	toolscache "k8s.io/client-go/tools/cache"
	crcache "sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/watchjournal/watchjournal/jcache"
)

// writeKeyFile writes one random key, base64 on a line, as a mounted
// Secret's file holds it, and returns its path.
func writeKeyFile(t *testing.T) string {
	t.Helper()
	key := make([]byte, 32)
	if _, err := rand.Read(key); err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(t.TempDir(), "keys")
	if err := os.WriteFile(p, []byte(base64.StdEncoding.EncodeToString(key)+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// grepDir fails t if any regular file under dir (journal files, a relist's
// stage file) holds one of the values or its base64.
func grepDir(t *testing.T, dir string, values ...string) {
	t.Helper()
	var needles [][]byte
	for _, v := range values {
		needles = append(needles, []byte(v), []byte(base64.StdEncoding.EncodeToString([]byte(v))))
	}
	n := 0
	err := filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err != nil || !d.Type().IsRegular() {
			return err
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		n++
		for _, s := range needles {
			if bytes.Contains(b, s) {
				t.Errorf("%s holds %q in plaintext", p, s)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if n == 0 {
		t.Fatalf("no file in %s", dir)
	}
}

// secretEvents records a Secret handler's data values, as "add v" and
// "update v1 -> v2".
func secretEvents(rec *recorder) toolscache.ResourceEventHandlerFuncs {
	val := func(o any) string { return string(o.(*corev1.Secret).Data["v"]) }
	return toolscache.ResourceEventHandlerFuncs{
		AddFunc:    func(o any) { rec.add("add " + val(o)) },
		UpdateFunc: func(old, o any) { rec.add("update " + val(old) + " -> " + val(o)) },
		DeleteFunc: func(o any) {},
	}
}

// TestCache_SecretsSealedWithKey: a cache with SecretPayloads and a key
// file gives a Secret's data to Get and to an informer handler, also after
// a restart that relists (a 410 after an etcd compaction); no file in the
// cache's directory ever holds a value or its base64.
func TestCache_SecretsSealedWithKey(t *testing.T) {
	cp, kube, ns := setup(t)
	dir := t.TempDir()
	newCache := jcache.NewFunc(jcache.Options{Dir: dir, NoSync: true, SecretPayloads: true, KeyFiles: []string{writeKeyFile(t)}})
	opts := crcache.Options{Scheme: scheme.Scheme}
	const v1, v2, v3 = "jseal-first-value-5c1d0e", "jseal-second-value-8ab27f", "jseal-third-value-c093e4"
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	sec := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "s"}, Data: map[string][]byte{"v": []byte(v1)}}
	sec, err := kube.CoreV1().Secrets(ns).Create(ctx, sec, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}

	r1 := startCache(t, newCache, opts, cp)
	var got corev1.Secret
	if err := r1.c.Get(ctx, client.ObjectKey{Namespace: ns, Name: "s"}, &got); err != nil {
		t.Fatalf("Get: %v", err)
	}
	if string(got.Data["v"]) != v1 {
		t.Fatalf("Get: data %q, want %q", got.Data["v"], v1)
	}
	rec := newRecorder()
	addHandler(t, ctx, r1.c, &corev1.Secret{}, secretEvents(rec))
	rec.waitFor(t, "the Secret's add", hasAll("add "+v1))
	sec.Data["v"] = []byte(v2)
	if sec, err = kube.CoreV1().Secrets(ns).Update(ctx, sec, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	rec.waitFor(t, "the Secret's update", hasAll("update "+v1+" -> "+v2))
	grepDir(t, dir, v1, v2)
	r1.stop()

	// Changed while no cache runs, then etcd compacted: the restarted
	// cache's resume gets 410 Gone and relists through the stage file.
	sec.Data["v"] = []byte(v3)
	if _, err = kube.CoreV1().Secrets(ns).Update(ctx, sec, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := cp.Compact(ctx); err != nil {
		t.Fatal(err)
	}
	r2 := startCache(t, newCache, opts, cp)
	defer r2.stop()
	rec2 := newRecorder()
	addHandler(t, ctx, r2.c, &corev1.Secret{}, secretEvents(rec2))
	// A handler added after the relist gets the relisted object as an
	// add; one added before it, the update.
	rec2.waitFor(t, "the relisted Secret", func(evs []string) bool {
		return hasAll("add "+v3)(evs) || hasAll("update "+v2+" -> "+v3)(evs)
	})
	if err := r2.c.Get(ctx, client.ObjectKey{Namespace: ns, Name: "s"}, &got); err != nil {
		t.Fatalf("Get after the relist: %v", err)
	}
	if string(got.Data["v"]) != v3 {
		t.Fatalf("Get after the relist: data %q, want %q", got.Data["v"], v3)
	}
	grepDir(t, dir, v1, v2, v3)
}

// TestCache_KeyFileMalformed: a key file that holds no key fails New.
func TestCache_KeyFileMalformed(t *testing.T) {
	p := filepath.Join(t.TempDir(), "keys")
	if err := os.WriteFile(p, []byte("not a key\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	_, err := jcache.NewFunc(jcache.Options{Dir: t.TempDir(), KeyFiles: []string{p}})(nil, crcache.Options{})
	if err == nil || !strings.Contains(err.Error(), "KeyFiles") {
		t.Fatalf("New with a malformed key file = %v, want an error naming KeyFiles", err)
	}
}
