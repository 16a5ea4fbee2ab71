package reconcile_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"

	"github.com/watchjournal/watchjournal/reconcile"
)

// failPages answers list requests with an error status while on is set,
// and counts them: only pages after the first (with a continue token), or
// every list when all is set.
type failPages struct {
	mu   sync.Mutex
	on   bool
	all  bool
	code int // default 500
	hits int
}

// set turns the failures on or off; it returns how many were served.
func (f *failPages) set(on bool) (hits int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.on = on
	return f.hits
}

func (f *failPages) wrap(rt http.RoundTripper) http.RoundTripper {
	return roundTripFunc(func(req *http.Request) (*http.Response, error) {
		q := req.URL.Query()
		f.mu.Lock()
		// Lists fail; with all, so do streaming lists (a watch with
		// sendInitialEvents), the loop's other way to list.
		list := q.Get("watch") != "true" || q.Get("sendInitialEvents") == "true"
		fail := f.on && list && (f.all || q.Get("continue") != "")
		code := f.code
		if fail {
			f.hits++
		}
		f.mu.Unlock()
		if !fail {
			return rt.RoundTrip(req)
		}
		if code == 0 {
			code = http.StatusInternalServerError
		}
		reason := map[int]string{500: "InternalError", 404: "NotFound", 403: "Forbidden", 503: "ServiceUnavailable"}[code]
		body := fmt.Sprintf(`{"kind":"Status","apiVersion":"v1","status":"Failure","message":"injected","reason":%q,"code":%d}`, reason, code)
		return &http.Response{StatusCode: code, Status: http.StatusText(code), Request: req, ProtoMajor: 1, ProtoMinor: 1,
			Header: http.Header{"Content-Type": {"application/json"}}, Body: io.NopCloser(strings.NewReader(body))}, nil
	})
}

// A relist whose later pages fail with 5xx changes nothing (no DELETED for
// keys on the pages it never read) and is retried with backoff until it
// completes; then exactly the gap is journaled.
func TestLoop_RelistPageFails_ChangesNothingUntilComplete(t *testing.T) {
	e := newEnv(t)
	e.createAll("a", "b", "c", "d", "e")
	f := &failPages{}
	cfg := e.wrapped(f.wrap)
	h := e.startListed(cfg, pagedOptions(t)) // PageSize 2

	f.set(true)
	e.proxy.Cut()
	e.delete("a")
	e.create("f")
	e.compact()
	e.proxy.Heal()
	e.waitStatus("list failing with 500", func(s reconcile.Status) bool {
		return errors.Is(s.LastError, reconcile.ErrList) && apierrors.IsInternalError(s.LastError)
	})
	hits := f.set(false)
	if got, _ := e.eventsFrom(h + 1); len(got) != 0 || hits == 0 {
		t.Fatalf("while page 2 fails: events %q (500s served: %d); want none", got, hits)
	}
	if st, _ := e.j.Stats(); st.Objects != 5 {
		t.Fatalf("index holds %d objects while the relist fails; want the 5 it had", st.Objects)
	}
	e.waitStatus("relist completes", watching(2))
	e.expectEvents("events after the relist", h+1, []string{"DELETED a relist", "ADDED f relist"})
	e.checkIndex(e.j)
}

// A CRD deleted under the loop: the watch sees its objects deleted, then
// lists answer 404; the loop backs off with a NotFound error and infers
// nothing; when the CRD comes back, it lists and watches again.
func TestLoop_CRDDeleted_NothingInferredWhileNotFound(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	group := "wj.example.com"
	crdGVR := schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}
	ext := dynamic.NewForConfigOrDie(e.cp.RESTConfig()).Resource(crdGVR)
	crdName := "widgets." + group
	newCRD := func() *unstructured.Unstructured {
		return &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
			"metadata": map[string]any{"name": crdName},
			"spec": map[string]any{
				"group": group, "scope": "Namespaced",
				"names": map[string]any{"plural": "widgets", "singular": "widget", "kind": "Widget", "listKind": "WidgetList"},
				"versions": []any{map[string]any{"name": "v1", "served": true, "storage": true,
					"schema": map[string]any{"openAPIV3Schema": map[string]any{"type": "object", "x-kubernetes-preserve-unknown-fields": true}}}},
			},
		}}
	}
	if _, err := ext.Create(ctx, newCRD(), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	gvr := schema.GroupVersionResource{Group: group, Version: "v1", Resource: "widgets"}
	dyn := dynamic.NewForConfigOrDie(e.cp.RESTConfig()).Resource(gvr).Namespace(e.ns)
	createWidget := func(name string) {
		t.Helper()
		deadline := time.Now().Add(30 * time.Second)
		for { // the CRD takes a moment to be served
			_, err := dyn.Create(ctx, &unstructured.Unstructured{Object: map[string]any{
				"apiVersion": group + "/v1", "kind": "Widget", "metadata": map[string]any{"name": name}}}, metav1.CreateOptions{})
			if err == nil {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("create widget %s: %v", name, err)
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	createWidget("w1")
	createWidget("w2")
	e.res.GVR = gvr
	h := e.startListed(nil, testOptions(t))

	if err := ext.Delete(ctx, crdName, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	e.waitStatus("NotFound", func(s reconcile.Status) bool { return apierrors.IsNotFound(s.LastError) })
	// Deleting a CRD deletes its objects first, and the watch sees that:
	// those events are real. What matters is that nothing was inferred from
	// a failed list.
	got, evs := e.eventsFrom(h + 1)
	for _, ev := range evs {
		if ev.Synthesized() {
			t.Fatalf("events while the CRD is gone = %q; want none inferred", got)
		}
	}

	deadline := time.Now().Add(60 * time.Second)
	for { // the old CRD finishes deleting first
		_, err := ext.Create(ctx, newCRD(), metav1.CreateOptions{})
		if err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("recreate CRD: %v", err)
		}
		time.Sleep(200 * time.Millisecond)
	}
	createWidget("w3")
	e.waitStatus("watching again", func(s reconcile.Status) bool {
		st, _ := e.j.Stats()
		return s.Phase == reconcile.PhaseWatching && s.LastError == nil && st.Objects == 1
	})
	e.checkIndex(e.j)
	checkJournalConsistent(t, e.j)
}

// Every list answering 404 (the resource or its namespace path gone) or 503
// while a relist is due: the loop backs off with the typed error and the
// index is never wiped.
func TestLoop_ListFailsEntirely_IndexNeverWiped(t *testing.T) {
	for _, code := range []int{http.StatusNotFound, http.StatusServiceUnavailable} {
		t.Run(http.StatusText(code), func(t *testing.T) {
			e := newEnv(t)
			e.createAll("a", "b", "c")
			f := &failPages{all: true, code: code}
			cfg := e.wrapped(f.wrap)
			h := e.startListed(cfg, testOptions(t))

			f.set(true)
			e.proxy.Cut()
			e.create("d")
			e.delete("a")
			e.compact()
			e.proxy.Heal()
			// The failing list is the relist, or the resume check's
			// one-item list before it (probe.go): either way the loop
			// backs off with the server's answer.
			e.waitStatus("failing lists", func(s reconcile.Status) bool {
				return (errors.Is(s.LastError, reconcile.ErrList) || errors.Is(s.LastError, reconcile.ErrWatchStart)) &&
					(apierrors.IsNotFound(s.LastError) || apierrors.IsServiceUnavailable(s.LastError))
			})
			e.waitStatus("a retry", func(s reconcile.Status) bool { f.mu.Lock(); defer f.mu.Unlock(); return f.hits >= 2 })
			if st, _ := e.j.Stats(); st.Objects != 3 || e.head() != h {
				t.Fatalf("while every list fails: %d objects, head %d; want 3 objects, head %d", st.Objects, e.head(), h)
			}
			f.set(false)
			e.waitStatus("relist completes", watching(2))
			e.expectEvents("events after the relist", h+1, []string{"DELETED a relist", "ADDED d relist"})
			e.checkIndex(e.j)
		})
	}
}
