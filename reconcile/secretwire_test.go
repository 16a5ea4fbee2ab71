package reconcile_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"sync"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/scheme"

	"github.com/watchjournal/watchjournal/reconcile"
)

// secretValue starts every Secret's value; 21 bytes, a multiple of 3, so
// its base64 (as the API sends data) is the same prefix whatever follows.
const secretValue = "wj-very-secret-4f1d2c"

// wireRecorder keeps every response body the apiserver sent, and at each
// list request a copy of the stage file, if there is one.
type wireRecorder struct {
	stagePath string
	mu        sync.Mutex
	received  bytes.Buffer
	stages    [][]byte
}

func (w *wireRecorder) wrap(rt http.RoundTripper) http.RoundTripper {
	return roundTripFunc(func(req *http.Request) (*http.Response, error) {
		if req.URL.Query().Get("watch") != "true" {
			if b, err := os.ReadFile(w.stagePath); err == nil {
				w.mu.Lock()
				w.stages = append(w.stages, b)
				w.mu.Unlock()
			}
		}
		resp, err := rt.RoundTrip(req)
		if err == nil {
			resp.Body = struct {
				io.Reader
				io.Closer
			}{io.TeeReader(resp.Body, lockedWriter{&w.mu, &w.received}), resp.Body}
		}
		return resp, err
	})
}

type lockedWriter struct {
	mu *sync.Mutex
	w  io.Writer
}

func (l lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

// leaks reports which form of the secret value b holds, if any.
func leaks(b []byte) string {
	for _, needle := range []string{secretValue, base64.StdEncoding.EncodeToString([]byte(secretValue))} {
		if bytes.Contains(b, []byte(needle)) {
			return needle
		}
	}
	return ""
}

// A metadata-only journal of Secrets asks the server for
// metadata only, so a Secret's data never leaves the apiserver: not in an
// initial list, a watch update, nor a relist after a 410. The bytes received
// hold neither the value nor its base64; nor do the raw bytes of the .db
// file or of the .relist stage file (copied at every list request: 300
// Secrets with 2 KiB of annotations stage more than the stage file's write
// buffer, so it has records on disk mid-list). Every journaled object is a
// v1 Secret with its metadata and no data. (Secrets fetched in full and
// stripped on the client would carry their data over the wire.)
func TestLoop_Secrets_DataNeverLeavesTheServer(t *testing.T) {
	e := secretsEnv(t)
	e.res.MetadataOnly = true
	ctx := context.Background()
	secrets := e.kube.CoreV1().Secrets(e.ns)
	const n = 300
	padding := strings.Repeat("p", 2<<10)
	for i := range n {
		s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("s-%03d", i), Labels: map[string]string{"app": "x"},
			Annotations: map[string]string{"padding": padding}},
			Data: map[string][]byte{"password": []byte(fmt.Sprintf("%s-%d", secretValue, i))}}
		if _, err := secrets.Create(ctx, s, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	setData := func(i int, v string) {
		t.Helper()
		s, err := secrets.Get(ctx, fmt.Sprintf("s-%03d", i), metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		s.Data["password"] = []byte(v)
		if _, err := secrets.Update(ctx, s, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	w := &wireRecorder{stagePath: e.path + ".relist"}
	cfg := e.wrapped(w.wrap)
	opts := pagedOptions(t)
	opts.PageSize = 50
	e.start(cfg, opts)
	e.waitStatus("initial list", watching(1))
	w.mu.Lock()
	listStages := len(w.stages)
	w.mu.Unlock()

	setData(0, secretValue+"-watched")
	e.waitHead(n + 1)

	e.proxy.Cut()
	for i := 1; i <= 150; i++ {
		setData(i, secretValue+"-while-away")
	}
	e.compact()
	e.proxy.Heal()
	e.waitStatus("relist after 410", func(s reconcile.Status) bool { return s.Gone >= 1 && watching(2)(s) })
	got, evs := e.eventsFrom(1)
	if len(got) != n+1+150 {
		t.Errorf("%d events; want %d (list, one watch update, 150 relisted)", len(got), n+1+150)
	}
	e.checkIndex(e.j)
	e.stop()

	w.mu.Lock()
	defer w.mu.Unlock()
	if w.received.Len() == 0 || !bytes.Contains(w.received.Bytes(), []byte("PartialObjectMetadata")) {
		t.Errorf("received %d bytes without PartialObjectMetadata; the recorder saw nothing", w.received.Len())
	}
	if l := leaks(w.received.Bytes()); l != "" {
		t.Errorf("the apiserver sent the secret's data (%q) in %d bytes of responses", l, w.received.Len())
	}
	staged := [2]int{} // stage copies with records: during the initial list, during the relist
	for i, b := range w.stages {
		if l := leaks(b); l != "" {
			t.Errorf("stage file copy %d holds the secret's data (%q)", i, l)
		}
		if len(b) > 16 {
			if i < listStages {
				staged[0]++
			} else {
				staged[1]++
			}
		}
	}
	// The initial list goes straight into the empty index (journal.Relist);
	// the relist stages, and its stage file is checked above.
	if staged[0] != 0 || staged[1] == 0 {
		t.Errorf("stage file copies with records: %d in the initial list, %d in the relist (of %d); want none, then some",
			staged[0], staged[1], len(w.stages))
	}
	db, err := os.ReadFile(e.path)
	if err != nil {
		t.Fatal(err)
	}
	if l := leaks(db); l != "" {
		t.Errorf("the .db file holds the secret's data (%q)", l)
	}
	dec := scheme.Codecs.UniversalDeserializer()
	for _, ev := range evs {
		if ev.Object == nil {
			continue
		}
		obj, gvk, err := dec.Decode(ev.Object, nil, nil)
		s, ok := obj.(*corev1.Secret)
		if err != nil || !ok || gvk.Kind != "Secret" || gvk.Version != "v1" || s.Labels["app"] != "x" || len(s.Data) != 0 || s.Annotations["padding"] != padding {
			t.Errorf("%s %s (%s) = %v %T, %v; want a v1 Secret with its metadata and no data\n%.300s", ev.Type, ev.Key, ev.Origin, gvk, obj, err, ev.Object)
			break
		}
	}
}
