package crsource

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/watchjournal/watchjournal/journal"
)

// Where a new leader starts for a published position (StartFor) and what
// a commit publishes (Tracker.At) are tested in internal/position.

// A source with Options.Standby whose AddToManager was never called
// refuses to start, naming the call, instead of running as a cold standby
// that never publishes.
func TestStandby_NotAdded(t *testing.T) {
	res := journal.Resource{GVR: schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}, Namespace: "wj"}
	src, err := New(&rest.Config{Host: "https://127.0.0.1:1"}, Options{Path: filepath.Join(t.TempDir(), "j.db"), Resource: res, NoSync: true,
		Standby: &Standby{Namespace: "wj"}})
	if err != nil {
		t.Fatal(err)
	}
	q := workqueue.NewTypedRateLimitingQueue(workqueue.DefaultTypedControllerRateLimiter[reconcile.Request]())
	defer q.ShutDown()
	if err := src.Start(context.Background(), q); !errors.Is(err, ErrStandbyNotAdded) || !strings.Contains(err.Error(), "src.AddToManager(mgr)") {
		t.Fatalf("Start = %v; want ErrStandbyNotAdded naming src.AddToManager(mgr)", err)
	}
	if err := src.Close(); err != nil {
		t.Fatalf("Close of a source that did not start = %v", err)
	}
	if _, err := New(&rest.Config{Host: "https://127.0.0.1:1"}, Options{Path: filepath.Join(t.TempDir(), "k.db"), Resource: res,
		Standby: &Standby{}}); err == nil || !strings.Contains(err.Error(), "Namespace") {
		t.Errorf("New with Standby.Namespace empty = %v; want an error naming Namespace", err)
	}
}
