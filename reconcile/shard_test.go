package reconcile_test

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr/testr"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes"

	"github.com/watchjournal/watchjournal/internal/hashrange"
	"github.com/watchjournal/watchjournal/internal/testing/controlplane"
	"github.com/watchjournal/watchjournal/journal"
	"github.com/watchjournal/watchjournal/reconcile"
)

// A journal bound to half the hash space holds exactly the objects whose
// UID hashes there, listed and watched, in the mode the apiserver allows:
// server with the ShardedListAndWatch gate on (a metadata-only journal of
// Secrets included: its probe asks for metadata only), client with it off;
// an empty collection is told apart by shardInfo in full lists, and taken
// as client mode for a metadata-only journal, which cannot tell.
func TestLoop_ShardRange(t *testing.T) {
	for _, gate := range []bool{true, false} {
		t.Run(fmt.Sprintf("gate %v", gate), func(t *testing.T) {
			opts := controlplane.Options{}
			want := reconcile.ShardClient
			if gate {
				opts.ExtraAPIServerArgs = []string{"--feature-gates=ShardedListAndWatch=true"}
				want = reconcile.ShardServer
			}
			cp := controlplane.StartT(t, opts)
			kube := kubernetes.NewForConfigOrDie(cp.RESTConfig())
			ctx := context.Background()
			low := hashrange.Set{{First: 0, Last: 1<<63 - 1}}
			create := func(kind string, n, from int) map[string]string {
				out := map[string]string{}
				for i := range n {
					name := fmt.Sprintf("o-%03d", from+i)
					var uid string
					if kind == "secrets" {
						s, err := kube.CoreV1().Secrets("default").Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: name}, StringData: map[string]string{"k": "secret"}}, metav1.CreateOptions{})
						if err != nil {
							t.Fatal(err)
						}
						uid = string(s.UID)
					} else {
						c, err := kube.CoreV1().ConfigMaps("default").Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{})
						if err != nil {
							t.Fatal(err)
						}
						uid = string(c.UID)
					}
					if low.ContainsUID(uid) {
						out["default/"+name] = uid
					}
				}
				return out
			}
			for _, tc := range []struct {
				kind     string
				metaOnly bool
				objects  int
				mode     reconcile.ShardMode
			}{
				{"configmaps", false, 40, want},
				{"secrets", true, 40, want},
				{"limitranges", false, 0, want},                  // shardInfo tells
				{"podtemplates", true, 0, reconcile.ShardClient}, // metadata only, nothing listed: cannot tell
			} {
				var inRange map[string]string
				if tc.objects > 0 {
					inRange = create(tc.kind, tc.objects, 0)
				}
				res := journal.Resource{GVR: schema.GroupVersionResource{Version: "v1", Resource: tc.kind}, Namespace: "default",
					MetadataOnly: tc.metaOnly, ShardSelector: low.Selector()}
				j, err := journal.Open(filepath.Join(t.TempDir(), tc.kind+".db"), &journal.Options{Resource: &res, NoSync: true})
				if err != nil {
					t.Fatal(err)
				}
				l, err := reconcile.New(cp.RESTConfig(), j, reconcile.Options{Logger: testr.New(t)})
				if err != nil {
					t.Fatal(err)
				}
				lctx, cancel := context.WithCancel(ctx)
				done := make(chan error, 1)
				go func() { done <- l.Run(lctx) }()
				wctx, wcancel := context.WithTimeout(ctx, 30*time.Second)
				if err := l.WaitFor(wctx, func(s reconcile.Status) bool { return s.Synced }); err != nil {
					t.Fatalf("%s: not synced: %v; status %+v", tc.kind, err, l.Status())
				}
				if got := l.Status().ShardMode; got != tc.mode {
					t.Errorf("%s: ShardMode = %q; want %q", tc.kind, got, tc.mode)
				}
				if tc.objects > 0 {
					// The watch: more objects, only the range's kept.
					for k, v := range create(tc.kind, 20, tc.objects) {
						inRange[k] = v
					}
					for {
						keys, _ := j.ScanIndex("", 1000)
						if len(keys) == len(inRange) {
							break
						}
						if wctx.Err() != nil {
							t.Fatalf("%s: index holds %d keys; want the %d in range", tc.kind, len(keys), len(inRange))
						}
						time.Sleep(50 * time.Millisecond)
					}
					keys, _ := j.ScanIndex("", 1000)
					for _, e := range keys {
						if inRange[e.Key] != e.UID {
							t.Errorf("%s: index holds %s (uid %s), outside the range", tc.kind, e.Key, e.UID)
						}
					}
					evs, _ := j.Read(1, 1000)
					for _, e := range evs {
						if tc.metaOnly && containsSecret(e.Object) {
							t.Errorf("%s: event %d carries the Secret's data", tc.kind, e.Offset)
						}
					}
				}
				wcancel()
				cancel()
				if err := <-done; err != nil {
					t.Fatal(err)
				}
				_ = j.Close()
			}
		})
	}
}

func containsSecret(obj []byte) bool {
	return strings.Contains(string(obj), `"data"`) || strings.Contains(string(obj), "c2VjcmV0")
}
