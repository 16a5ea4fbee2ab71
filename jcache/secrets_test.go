package jcache_test

// Secrets in one line, against the real kube-apiserver: a manager whose
// only jcache option is Dir reconciles typed Secrets, their data sealed
// under a key made for the process (a restart starts the file afresh);
// with KeyFiles the file survives a restart and the watch resumes; an
// index over a Secret's data holds no plaintext; a restart that would no
// longer seal a sealed file is refused.

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	ctrl "sigs.k8s.io/controller-runtime"
	crcache "sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/watchjournal/watchjournal/internal/testing/controlplane"
	"github.com/watchjournal/watchjournal/jcache"
	"github.com/watchjournal/watchjournal/journal"
)

// secretReader reconciles Secrets: it reads each through the manager's
// client and records its data value "v" by name.
type secretReader struct {
	c  client.Client
	mu sync.Mutex
	v  map[types.NamespacedName]string
	ch chan struct{}
}

func newSecretReader(c client.Client) *secretReader {
	return &secretReader{c: c, v: map[types.NamespacedName]string{}, ch: make(chan struct{})}
}

func (r *secretReader) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	var s corev1.Secret
	if err := r.c.Get(ctx, req.NamespacedName, &s); err != nil {
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	r.mu.Lock()
	r.v[req.NamespacedName] = string(s.Data["v"])
	close(r.ch)
	r.ch = make(chan struct{})
	r.mu.Unlock()
	return reconcile.Result{}, nil
}

// waitValues waits until the Secrets of want (name → value in ns) were
// reconciled with those values.
func (r *secretReader) waitValues(t *testing.T, ns string, want map[string]string, why string) {
	t.Helper()
	deadline := time.After(60 * time.Second)
	for {
		r.mu.Lock()
		ok := true
		for name, v := range want {
			if r.v[types.NamespacedName{Namespace: ns, Name: name}] != v {
				ok = false
			}
		}
		got, ch := fmt.Sprint(r.v), r.ch
		r.mu.Unlock()
		if ok {
			return
		}
		select {
		case <-ch:
		case <-deadline:
			t.Fatalf("%s: reconciled %s; want %v", why, got, want)
		}
	}
}

// runSecretManager starts a manager on cp with NewCache: newCache and a
// For(&corev1.Secret{}) controller; stop stops it and waits.
func runSecretManager(t *testing.T, cp *controlplane.ControlPlane, newCache crcache.NewCacheFunc) (r *secretReader, mgr ctrl.Manager, stop func()) {
	t.Helper()
	mgr = newManager(t, cp.RESTConfig(), ctrl.Options{NewCache: newCache})
	r = newSecretReader(mgr.GetClient())
	if err := ctrl.NewControllerManagedBy(mgr).Named(fmt.Sprintf("secrets-%d", time.Now().UnixNano())).For(&corev1.Secret{}).Complete(r); err != nil {
		t.Fatal(err)
	}
	return r, mgr, runManager(t, mgr).stop
}

// createSecrets creates a Secret per name with data v: value.
func createSecrets(t *testing.T, kube kubernetes.Interface, ns string, values map[string]string) {
	t.Helper()
	for name, v := range values {
		s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Data: map[string][]byte{"v": []byte(v)}}
		if _, err := kube.CoreV1().Secrets(ns).Create(context.Background(), s, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
}

// updateSecret sets the data v of Secret name.
func updateSecret(t *testing.T, kube kubernetes.Interface, ns, name, v string) {
	t.Helper()
	ctx := context.Background()
	s, err := kube.CoreV1().Secrets(ns).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	s.Data = map[string][]byte{"v": []byte(v)}
	if _, err := kube.CoreV1().Secrets(ns).Update(ctx, s, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// secretsFile returns the path of the typed Secrets' file in dir.
func secretsFile(t *testing.T, dir string) string {
	t.Helper()
	ms, err := filepath.Glob(filepath.Join(dir, "secrets.v1.*.db"))
	if err != nil {
		t.Fatal(err)
	}
	ms = slices.DeleteFunc(ms, func(p string) bool { return strings.Contains(filepath.Base(p), ".meta.") })
	if len(ms) != 1 {
		t.Fatalf("Secrets files in %s: %v, want one", dir, ms)
	}
	return ms[0]
}

// fileStats returns the stats of a closed journal file, read without a key.
func fileStats(t *testing.T, path string) journal.Stats {
	t.Helper()
	j, err := journal.Open(path, &journal.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer j.Close()
	st, err := j.Stats()
	if err != nil {
		t.Fatal(err)
	}
	return st
}

// TestManager_SecretsWithoutKey: a manager whose cache has only Dir
// reconciles every typed Secret and reads its data through the manager's
// client; the file holds no value in plaintext. A restart (a new process
// key) starts the file afresh: the Secrets are listed again (the file's
// events are one ADDED per object, the update of the first run is gone),
// reads are right, and still nothing is in plaintext.
func TestManager_SecretsWithoutKey(t *testing.T) {
	cp, kube, ns := setup(t)
	dir := t.TempDir()
	values := map[string]string{"a": "jsecret-one-line-a-71c2e9", "b": "jsecret-one-line-b-0d5f3a"}
	createSecrets(t, kube, ns, values)

	r, _, stop := runSecretManager(t, cp, jcache.NewFunc(jcache.Options{Dir: dir}))
	r.waitValues(t, ns, values, "first start")
	const updated = "jsecret-one-line-a2-e8b104"
	updateSecret(t, kube, ns, "a", updated)
	values["a"] = updated
	r.waitValues(t, ns, values, "the update")
	stop()
	path := secretsFile(t, dir)
	st1 := fileStats(t, path)
	if st1.LastOffset <= st1.Objects {
		t.Fatalf("after the first run the file holds %d events for %d objects; want the update too", st1.LastOffset, st1.Objects)
	}
	grepDir(t, dir, "jsecret-one-line-a-71c2e9", "jsecret-one-line-b-0d5f3a", updated)

	// A new process: a new key.
	r, _, stop = runSecretManager(t, cp, jcache.NewFunc(jcache.WithNewProcessKey(jcache.Options{Dir: dir})))
	r.waitValues(t, ns, values, "after a restart without a key")
	stop()
	st2 := fileStats(t, path)
	if st2.FirstOffset != 1 || st2.LastOffset != st2.Objects || st2.Objects != st1.Objects {
		t.Fatalf("after the restart the file holds events %d..%d for %d objects (before: %d..%d for %d); want it listed afresh: 1..%d",
			st2.FirstOffset, st2.LastOffset, st2.Objects, st1.FirstOffset, st1.LastOffset, st1.Objects, st1.Objects)
	}
	grepDir(t, dir, "jsecret-one-line-a-71c2e9", "jsecret-one-line-b-0d5f3a", updated)
}

// TestManager_SecretsWithKeyFilesResume: with KeyFiles, the file survives
// a restart: its events stay, and a change made while no manager ran
// arrives as one MODIFIED seen on the resumed watch, not from a list.
func TestManager_SecretsWithKeyFilesResume(t *testing.T) {
	cp, kube, ns := setup(t)
	dir := t.TempDir()
	keyFile := writeKeyFile(t)
	newCache := jcache.NewFunc(jcache.Options{Dir: dir, KeyFiles: []string{keyFile}})
	values := map[string]string{"a": "jsecret-keyed-a-4f09d1", "b": "jsecret-keyed-b-93a7c5"}
	createSecrets(t, kube, ns, values)

	r, _, stop := runSecretManager(t, cp, newCache)
	r.waitValues(t, ns, values, "first start")
	stop()
	path := secretsFile(t, dir)
	st1 := fileStats(t, path)

	const updated = "jsecret-keyed-a2-2bb6e0"
	updateSecret(t, kube, ns, "a", updated)
	values["a"] = updated
	r, _, stop = runSecretManager(t, cp, jcache.NewFunc(jcache.WithNewProcessKey(jcache.Options{Dir: dir, KeyFiles: []string{keyFile}})))
	r.waitValues(t, ns, values, "after a restart with the key")
	stop()
	grepDir(t, dir, "jsecret-keyed-a-4f09d1", "jsecret-keyed-b-93a7c5", updated)

	keys, err := journal.LoadKeyring(keyFile)
	if err != nil {
		t.Fatal(err)
	}
	j, err := journal.Open(path, &journal.Options{ReadOnly: true, Keyring: keys})
	if err != nil {
		t.Fatal(err)
	}
	defer j.Close()
	evs, err := j.Read(1, 0)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, e := range evs {
		got = append(got, fmt.Sprintf("%d %s %s %s", e.Offset, e.Type, e.Key, e.Origin))
	}
	want := fmt.Sprintf("%d %s %s/a %s", st1.LastOffset+1, journal.Modified, ns, journal.OriginWatch)
	if len(evs) != int(st1.LastOffset)+1 || got[len(got)-1] != want {
		t.Fatalf("events after the restart: %q; want the first run's %d and then %q", got, st1.LastOffset, want)
	}
}

// TestManager_SecretIndexNoPlaintext: an IndexField over a Secret's data
// value is kept in the file (lookups served from disk) as keyed hashes:
// the file holds no indexed value in plaintext, and MatchingFields
// returns exactly the Secrets holding the value.
func TestManager_SecretIndexNoPlaintext(t *testing.T) {
	cp, kube, ns := setup(t)
	dir := t.TempDir()
	const owner1, owner2 = "jsecret-owner-one-6d1e0b", "jsecret-owner-two-a9c37f"
	for name, owner := range map[string]string{"x": owner1, "y": owner1, "z": owner2} {
		s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Data: map[string][]byte{"owner": []byte(owner)}}
		if _, err := kube.CoreV1().Secrets(ns).Create(context.Background(), s, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	mgr := newManager(t, cp.RESTConfig(), ctrl.Options{
		NewCache: jcache.NewFunc(jcache.Options{Dir: dir, SecretPayloads: true, KeyFiles: []string{writeKeyFile(t)}}),
	})
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	if err := mgr.GetFieldIndexer().IndexField(ctx, &corev1.Secret{}, "data.owner", func(o client.Object) []string {
		if v := o.(*corev1.Secret).Data["owner"]; len(v) > 0 {
			return []string{string(v)}
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	mctx, mcancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- mgr.Start(mctx) }()
	if !mgr.GetCache().WaitForCacheSync(ctx) {
		t.Fatal("the cache did not sync")
	}
	if _, err := jcache.Reindexes(ctx, dir); err != nil {
		t.Fatal(err)
	}
	names := func(owner string) []string {
		t.Helper()
		var l corev1.SecretList
		if err := mgr.GetClient().List(ctx, &l, client.InNamespace(ns), client.MatchingFields{"data.owner": owner}); err != nil {
			t.Fatalf("List data.owner=%s: %v", owner, err)
		}
		var out []string
		for _, s := range l.Items {
			out = append(out, s.Name)
		}
		slices.Sort(out)
		return out
	}
	disk0, _ := jcache.IndexReads()
	if got := names(owner1); !slices.Equal(got, []string{"x", "y"}) {
		t.Errorf("List data.owner=%s = %v; want [x y]", owner1, got)
	}
	if got := names(owner2); !slices.Equal(got, []string{"z"}) {
		t.Errorf("List data.owner=%s = %v; want [z]", owner2, got)
	}
	if got := names("jsecret-owner-none"); len(got) != 0 {
		t.Errorf("List data.owner=jsecret-owner-none = %v; want none", got)
	}
	if disk, _ := jcache.IndexReads(); disk-disk0 != 3 {
		t.Errorf("%d of 3 lookups served by the index on disk", disk-disk0)
	}
	mcancel()
	if err := <-done; err != nil {
		t.Errorf("manager: %v", err)
	}
	grepDir(t, dir, owner1, owner2)
}

// TestCache_DroppedSealingRefused: a file that seals its resource is not
// written by a restart that would not seal it: jcache restarted with the
// same key but without the resource in SealResources fails the informer
// with *journal.SealingError naming the option, and a writer of the
// Secrets' file without a keyring is refused the same way; nothing was
// written in plaintext.
func TestCache_DroppedSealingRefused(t *testing.T) {
	cp, kube, ns := setup(t)
	dir := t.TempDir()
	const secret = "jsecret-dropped-cm-51e8aa"
	createCM(t, kube, ns, "c", nil, map[string]string{"v": secret})
	createSecrets(t, kube, ns, map[string]string{"s": secret})
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	cms := schema.GroupResource{Resource: "configmaps"}

	keyFile := writeKeyFile(t)
	r := startCache(t, jcache.NewFunc(jcache.Options{Dir: dir, NoSync: true, SecretPayloads: true, KeyFiles: []string{keyFile},
		SealResources: []schema.GroupResource{cms}}), crcache.Options{Scheme: scheme.Scheme}, cp)
	var cm corev1.ConfigMap
	if err := r.c.Get(ctx, client.ObjectKey{Namespace: ns, Name: "c"}, &cm); err != nil || cm.Data["v"] != secret {
		t.Fatalf("Get ConfigMap (sealed) = %v, data %v", err, cm.Data)
	}
	var s corev1.Secret
	if err := r.c.Get(ctx, client.ObjectKey{Namespace: ns, Name: "s"}, &s); err != nil || string(s.Data["v"]) != secret {
		t.Fatalf("Get Secret = %v, data %v", err, s.Data)
	}
	r.stop()
	grepDir(t, dir, secret)

	r = startCache(t, jcache.NewFunc(jcache.Options{Dir: dir, NoSync: true, SecretPayloads: true, KeyFiles: []string{keyFile}}), crcache.Options{Scheme: scheme.Scheme}, cp)
	err := r.c.Get(ctx, client.ObjectKey{Namespace: ns, Name: "c"}, &cm)
	var se *journal.SealingError
	if !errors.As(err, &se) || !errors.Is(err, journal.ErrSealingDropped) || se.Option != "Options.SealResources" || !strings.Contains(err.Error(), "jcache.Options.SealResources") {
		t.Fatalf("Get ConfigMap after dropping it from SealResources = %v; want a *journal.SealingError naming jcache.Options.SealResources", err)
	}
	r.stop()
	grepDir(t, dir, secret)

	path := secretsFile(t, dir)
	before := fileStats(t, path)
	j, err := journal.Open(path, &journal.Options{NoSync: true})
	if err == nil {
		_ = j.Close()
	}
	if !errors.As(err, &se) || se.Option != "Options.Keyring" || se.Resource != "secrets" {
		t.Fatalf("a writable Open of the Secrets' file without a keyring = %v; want a *journal.SealingError naming Options.Keyring", err)
	}
	if after := fileStats(t, path); after.LastOffset != before.LastOffset || after.FileSize != before.FileSize || after.ResourceVersion != before.ResourceVersion {
		t.Fatalf("the refused open changed the file: %+v, was %+v", after, before)
	}
}
