package reconcile_test

import (
	"bytes"
	"context"
	"errors"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/watchjournal/watchjournal/journal"
	"github.com/watchjournal/watchjournal/reconcile"
)

// Watching Secrets keeps metadata only unless payloads are opted in: the
// data (and kubectl's last-applied annotation, which repeats it) never
// reaches the journal.
func TestLoop_Secrets_MetadataOnlyByDefault(t *testing.T) {
	t.Run("refused unless metadata-only or opted in", func(t *testing.T) {
		e := newEnv(t)
		e.res.GVR = schema.GroupVersionResource{Version: "v1", Resource: "secrets"}
		j, err := journal.Open(e.path, &journal.Options{Resource: &e.res, NoSync: true})
		if err != nil {
			t.Fatal(err)
		}
		defer j.Close()
		if _, err := reconcile.New(e.cp.RESTConfig(), j, testOptions(t)); !errors.Is(err, reconcile.ErrSecretPayloads) {
			t.Fatalf("New for Secrets without MetadataOnly or SecretPayloads = %v; want ErrSecretPayloads", err)
		}
	})
	for _, optIn := range []bool{false, true} {
		t.Run(map[bool]string{false: "metadata only", true: "opted in"}[optIn], func(t *testing.T) {
			e := newEnv(t)
			e.res.GVR = schema.GroupVersionResource{Version: "v1", Resource: "secrets"}
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
			e.start(nil, opts)
			e.waitStatus("initial list", watching(1))
			if err := e.kube.CoreV1().Secrets(e.ns).Delete(ctx, "s", metav1.DeleteOptions{}); err != nil {
				t.Fatal(err)
			}
			e.waitHead(2)
			_, evs := e.eventsFrom(1)
			for _, ev := range evs {
				leaked := bytes.Contains(ev.Object, []byte("aHVudGVyMg==")) // base64 of hunter2
				if leaked != optIn {
					t.Errorf("%s event holds the secret's data: %v; want %v\n%s", ev.Type, leaked, optIn, ev.Object)
				}
				if !bytes.Contains(ev.Object, []byte(`"app":"x"`)) {
					t.Errorf("%s event lost the metadata: %s", ev.Type, ev.Object)
				}
			}
		})
	}
}
