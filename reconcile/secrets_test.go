package reconcile_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"errors"
	"os"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/watchjournal/watchjournal/journal"
	"github.com/watchjournal/watchjournal/journal/cache"
	"github.com/watchjournal/watchjournal/reconcile"
)

// secretsEnv is newEnv whose resource is Secrets.
func secretsEnv(t *testing.T) *env {
	t.Helper()
	e := newEnv(t)
	e.res.GVR = schema.GroupVersionResource{Version: "v1", Resource: "secrets"}
	return e
}

// openSealing opens e's journal of e.res with SealResources seal and no
// keyring, closed with the test.
func (e *env) openSealing(seal []schema.GroupResource) *journal.Journal {
	e.t.Helper()
	j, err := journal.Open(e.path, &journal.Options{Resource: &e.res, NoSync: true, SealResources: seal})
	if err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(func() { j.Close() })
	return j
}

// Watching Secrets keeps metadata only unless payloads are opted in: the
// data (and kubectl's last-applied annotation, which repeats it) never
// reaches the journal.
func TestLoop_Secrets_MetadataOnlyByDefault(t *testing.T) {
	t.Run("refused unless metadata-only or opted in", func(t *testing.T) {
		e := secretsEnv(t)
		j := e.openSealing(nil)
		if _, err := reconcile.New(e.cp.RESTConfig(), j, testOptions(t)); !errors.Is(err, reconcile.ErrSecretPayloads) {
			t.Fatalf("New for Secrets without MetadataOnly or SecretPayloads = %v; want ErrSecretPayloads", err)
		}
	})
	t.Run("refused when opted in without a sealing key", func(t *testing.T) {
		e := secretsEnv(t)
		j := e.openSealing(nil)
		opts := testOptions(t)
		opts.SecretPayloads = true
		_, err := reconcile.New(e.cp.RESTConfig(), j, opts)
		if !errors.Is(err, reconcile.ErrSecretPayloads) || !strings.Contains(err.Error(), "Keyring") {
			t.Fatalf("New for Secrets with SecretPayloads but no keyring = %v; want ErrSecretPayloads saying to supply a Keyring", err)
		}
	})
	t.Run("refused for a resource listed as sensitive without a sealing key", func(t *testing.T) {
		e := newEnv(t)
		j := e.openSealing([]schema.GroupResource{{Resource: "configmaps"}})
		if _, err := reconcile.New(e.cp.RESTConfig(), j, testOptions(t)); !errors.Is(err, reconcile.ErrSecretPayloads) {
			t.Fatalf("New for ConfigMaps listed in SealResources without a keyring = %v; want ErrSecretPayloads", err)
		}
	})
	for _, optIn := range []bool{false, true} {
		t.Run(map[bool]string{false: "metadata only", true: "opted in"}[optIn], func(t *testing.T) {
			e := secretsEnv(t)
			e.res.MetadataOnly = !optIn
			ctx := context.Background()
			secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "s", Labels: map[string]string{"app": "x"},
				Annotations: map[string]string{"kubectl.kubernetes.io/last-applied-configuration": `{"data":{"password":"aHVudGVyMg=="}}`}},
				Data: map[string][]byte{"password": []byte("hunter2")}}
			if _, err := e.kube.CoreV1().Secrets(e.ns).Create(ctx, secret, metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
			opts := testOptions(t)
			opts.SecretPayloads = optIn
			if optIn {
				e.keyring = testKeyring(t, 1) // payloads only sealed (TestLoop_Secrets_Sealed)
			}
			e.start(nil, opts)
			e.waitStatus("initial list", watching(1))
			if err := e.kube.CoreV1().Secrets(e.ns).Delete(ctx, "s", metav1.DeleteOptions{}); err != nil {
				t.Fatal(err)
			}
			e.waitHead(2)
			_, evs := e.eventsFrom(1)
			for _, ev := range evs {
				obj := objectJSON(t, ev.Object)                       // protobuf, when opted in, as served
				leaked := bytes.Contains(obj, []byte("aHVudGVyMg==")) // base64 of hunter2
				if leaked != optIn {
					t.Errorf("%s event holds the secret's data: %v; want %v\n%s", ev.Type, leaked, optIn, obj)
				}
				if !bytes.Contains(obj, []byte(`"app":"x"`)) {
					t.Errorf("%s event lost the metadata: %s", ev.Type, obj)
				}
			}
		})
	}
}

// testKeyring returns a keyring of one key per byte in bs (32 bytes of
// it), the first the primary.
func testKeyring(t *testing.T, bs ...byte) *journal.Keyring {
	t.Helper()
	var keys [][]byte
	for _, b := range bs {
		keys = append(keys, bytes.Repeat([]byte{b}, journal.KeySize))
	}
	k, err := journal.NewKeyring(keys...)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

// assertSealedOnDisk fails when the journal file at path, or its relist
// stage file, holds any of values or its base64 (as a Secret's data is
// served).
func assertSealedOnDisk(t *testing.T, path string, values ...string) {
	t.Helper()
	for _, p := range []string{path, path + ".relist"} {
		b, err := os.ReadFile(p)
		if os.IsNotExist(err) && p != path {
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		for _, v := range values {
			for _, s := range []string{v, base64.StdEncoding.EncodeToString([]byte(v))} {
				if bytes.Contains(b, []byte(s)) {
					t.Errorf("%s holds %q in plaintext", p, s)
				}
			}
		}
	}
}

// getSecret reads a Secret's password through a journal/cache Reader of j.
func getSecret(j *journal.Journal, ns, name string) (string, error) {
	var s corev1.Secret
	if err := cache.NewReader(j, scheme.Scheme).Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, &s); err != nil {
		return "", err
	}
	return string(s.Data["password"]), nil
}

// Secrets journaled with SecretPayloads and a keyring reach the disk only
// sealed: neither the journal file nor its stage file holds a Secret's
// value or its base64, while a journal/cache Reader with the key reads
// it; without the key the read is a *journal.SealedError. Rotation: after
// key B is added as the primary, Secrets sealed under key A still read,
// new ones (from the watch, and from a relist after a 410, staged in the
// relist's stage file) are sealed under B, and a reader holding B alone
// reads only those.
func TestLoop_Secrets_Sealed(t *testing.T) {
	e := secretsEnv(t)
	ctx := context.Background()
	valueA, valueB, valueC := "hunter2-under-key-a-"+e.ns, "hunter2-under-key-b-"+e.ns, "hunter2-relisted-"+e.ns
	create := func(name, value string) {
		t.Helper()
		s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: name}, Data: map[string][]byte{"password": []byte(value)}}
		if _, err := e.kube.CoreV1().Secrets(e.ns).Create(ctx, s, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	create("a", valueA)
	opts := testOptions(t)
	opts.SecretPayloads = true
	ka, kb := bytes.Repeat([]byte{1}, journal.KeySize), bytes.Repeat([]byte{2}, journal.KeySize)
	e.keyring = testKeyring(t, 1)
	e.start(nil, opts)
	e.waitStatus("initial list", watching(1))
	if !e.j.Settings().Seals() {
		t.Fatal("the journal of Secrets with a keyring does not seal")
	}
	if got, err := getSecret(e.j, e.ns, "a"); err != nil || got != valueA {
		t.Fatalf("Get(a) with key A = %q, %v; want %q", got, err, valueA)
	}
	e.stop()
	assertSealedOnDisk(t, e.path, valueA)

	// Without the key: the object is a typed error, the index readable.
	j, err := journal.Open(e.path, &journal.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	_, err = getSecret(j, e.ns, "a")
	var se *journal.SealedError
	if !errors.As(err, &se) || !errors.Is(err, journal.ErrSealed) || se.KeyID != journal.KeyID(ka) {
		t.Errorf("Get(a) without a key = %v; want a *journal.SealedError naming key A (%s)", err, journal.KeyID(ka))
	}
	if ie, ok, err := j.Lookup(e.ns + "/a"); err != nil || !ok || ie.UID == "" || ie.ResourceVersion == "" {
		t.Errorf("Lookup(a) without a key = %+v, %v, %v; want its UID and resourceVersion", ie, ok, err)
	}
	_ = j.Close()

	// Rotation: B first, A kept.
	e.keyring = testKeyring(t, 2, 1)
	e.start(nil, opts)
	if ids := e.j.Settings().KeyIDs(); len(ids) != 2 || ids[0] != journal.KeyID(kb) {
		t.Fatalf("KeyIDs = %v; want B (%s) first", ids, journal.KeyID(kb))
	}
	// The restart's verify first, so that what follows is the watch's.
	e.waitStatus("the restart's verify", func(s reconcile.Status) bool { return s.Verifies >= 1 && s.Phase == reconcile.PhaseWatching })
	h := e.head()
	create("b", valueB)
	e.waitHead(h + 1)
	// A relist after a 410 with a change: its ADDED goes through the
	// relist's stage file.
	e.proxy.Cut()
	create("c", valueC)
	e.compact()
	e.proxy.Heal()
	e.waitHead(h + 2)
	if _, evs := e.eventsFrom(h + 2); len(evs) != 1 || evs[0].Origin != journal.OriginRelist || !bytes.Contains(objectJSON(t, evs[0].Object), []byte(base64.StdEncoding.EncodeToString([]byte(valueC)))) {
		t.Fatalf("events after the relist = %+v; want c's ADDED from the relist, opened", evs)
	}
	for name, want := range map[string]string{"a": valueA, "b": valueB, "c": valueC} {
		if got, err := getSecret(e.j, e.ns, name); err != nil || got != want {
			t.Errorf("Get(%s) with [B, A] = %q, %v; want %q", name, got, err, want)
		}
	}
	e.stop()
	assertSealedOnDisk(t, e.path, valueA, valueB, valueC)

	j, err = journal.Open(e.path, &journal.Options{ReadOnly: true, Keyring: testKeyring(t, 2)})
	if err != nil {
		t.Fatal(err)
	}
	defer j.Close()
	for name, want := range map[string]string{"b": valueB, "c": valueC} {
		if got, err := getSecret(j, e.ns, name); err != nil || got != want {
			t.Errorf("Get(%s) with [B] = %q, %v; want %q: new Secrets are sealed under the primary", name, got, err, want)
		}
	}
	if _, err := getSecret(j, e.ns, "a"); !errors.As(err, &se) || se.KeyID != journal.KeyID(ka) {
		t.Errorf("Get(a) with [B] = %v; want a *journal.SealedError naming key A", err)
	}
}
