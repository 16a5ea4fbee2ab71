package reconcile_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Acceptance 5: a continue token that expires between two pages (etcd
// compacted after a write) makes the list start again from the first page;
// the inconsistent token the 410 offers is never followed, and the result
// holds every object once.
func TestLoop_ContinueExpiresMidList_StartsAgain(t *testing.T) {
	e := newEnv(t)
	for _, n := range []string{"p1", "p2", "p3", "p4", "p5", "p6"} {
		e.create(n)
	}
	var once sync.Once
	var continues, offered []string
	var mu sync.Mutex
	cfg := e.cp.ProxiedRESTConfig(e.proxy)
	cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper {
		return roundTripFunc(func(req *http.Request) (*http.Response, error) {
			if c := req.URL.Query().Get("continue"); c != "" {
				mu.Lock()
				continues = append(continues, c)
				mu.Unlock()
				once.Do(func() {
					// Between page 1 and page 2: a write, then compaction past
					// the list's snapshot.
					_, err := e.kube.CoreV1().ConfigMaps(e.ns).Create(context.Background(),
						&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "late"}}, metav1.CreateOptions{})
					if err != nil {
						t.Errorf("create late: %v", err)
					}
					ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
					defer cancel()
					if _, err := e.cp.Compact(ctx); err != nil {
						t.Errorf("compact: %v", err)
					}
				})
			}
			resp, err := rt.RoundTrip(req)
			if err == nil && resp.StatusCode == http.StatusGone {
				body, _ := io.ReadAll(resp.Body)
				resp.Body = io.NopCloser(bytes.NewReader(body))
				var st metav1.Status
				if json.Unmarshal(body, &st) == nil && st.Continue != "" {
					mu.Lock()
					offered = append(offered, st.Continue)
					mu.Unlock()
				}
			}
			return resp, err
		})
	})
	e.start(cfg, pagedOptions(t)) // PageSize 2: seven objects take four pages
	st := e.waitStatus("initial list", watching(1))
	if st.ListRestarts != 1 {
		t.Errorf("Status.ListRestarts = %d; want 1", st.ListRestarts)
	}
	// The first page went into the empty index as it came (a first list
	// only adds: journal.Relist); the list from the first page again adds
	// what that page lacked, once each.
	got, _ := e.eventsFrom(1)
	equal(t, "events", got, []string{"ADDED p1 relist", "ADDED p2 relist", "ADDED late relist",
		"ADDED p3 relist", "ADDED p4 relist", "ADDED p5 relist", "ADDED p6 relist"})
	e.checkIndex(e.j)
	mu.Lock()
	defer mu.Unlock()
	if len(offered) != 1 {
		t.Fatalf("410s offering a continue token = %d; want 1", len(offered))
	}
	for _, c := range continues {
		if c == offered[0] {
			t.Errorf("the list followed the inconsistent continue token its 410 offered")
		}
	}
}
