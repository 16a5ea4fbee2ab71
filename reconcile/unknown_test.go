package reconcile_test

import (
	"context"
	"errors"
	"path/filepath"
	"slices"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/watchjournal/watchjournal/journal"
	"github.com/watchjournal/watchjournal/reconcile"
)

// A resource that discovery does not serve is an error from New, with the
// served name a typo was meant to be, not a loop that retries a 404
// forever; a file written from a served resource that is gone since (a
// CRD deleted while the process was down) still gets a loop that retries.
func TestNew_UnknownResource(t *testing.T) {
	e := newEnv(t)
	cfg := e.cp.RESTConfig()
	for _, tc := range []struct {
		name        string
		gvr         schema.GroupVersionResource
		gvServed    bool
		suggestions []string
	}{
		{"a typo in a core resource suggests the served name",
			schema.GroupVersionResource{Version: "v1", Resource: "configmapz"}, true, []string{"configmaps"}},
		{"a typo in a group's resource suggests the served name",
			schema.GroupVersionResource{Group: "apps", Version: "v1", Resource: "deploymnets"}, true, []string{"deployments"}},
		{"nothing close, no suggestion",
			schema.GroupVersionResource{Version: "v1", Resource: "gizmos"}, true, nil},
		{"a group version not served",
			schema.GroupVersionResource{Group: "nothere.example.com", Version: "v1", Resource: "widgets"}, false, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res := journal.Resource{GVR: tc.gvr, Namespace: e.ns}
			j, err := journal.Open(filepath.Join(t.TempDir(), "j.db"), &journal.Options{Resource: &res, NoSync: true})
			if err != nil {
				t.Fatal(err)
			}
			defer j.Close()
			l, err := reconcile.New(cfg, j, testOptions(t))
			var u *reconcile.UnknownResourceError
			if !errors.Is(err, reconcile.ErrUnknownResource) || !errors.As(err, &u) {
				t.Fatalf("New(%v) = %v, %v; want an *UnknownResourceError", tc.gvr, l, err)
			}
			if u.GVR != tc.gvr || u.GroupVersionServed != tc.gvServed || !slices.Equal(u.Suggestions, tc.suggestions) {
				t.Errorf("New(%v) error = %+v; want GroupVersionServed %v, Suggestions %q", tc.gvr, *u, tc.gvServed, tc.suggestions)
			}
			t.Logf("New: %v", err)
		})
	}

	t.Run("a file written from a served resource retries", func(t *testing.T) {
		// The kind recorded says discovery served it once; here it is
		// gone (as after a CRD deleted while the process was down).
		res := journal.Resource{GVR: schema.GroupVersionResource{Group: "gone.example.com", Version: "v1", Resource: "widgets"},
			Namespace: e.ns, Kind: "Widget", APIVersion: "gone.example.com/v1"}
		j, err := journal.Open(filepath.Join(t.TempDir(), "j.db"), &journal.Options{Resource: &res, NoSync: true})
		if err != nil {
			t.Fatal(err)
		}
		defer j.Close()
		l, err := reconcile.New(cfg, j, testOptions(t))
		if err != nil {
			t.Fatalf("New = %v; want a loop that retries", err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- l.Run(ctx) }()
		wctx, wcancel := context.WithTimeout(ctx, 60*time.Second)
		defer wcancel()
		if err := l.WaitFor(wctx, func(s reconcile.Status) bool { return apierrors.IsNotFound(s.LastError) && s.Backoffs >= 2 }); err != nil {
			t.Errorf("waiting for retried 404s: %v; status %+v", err, l.Status())
		}
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run = %v; want nil after cancel", err)
		}
	})
}
