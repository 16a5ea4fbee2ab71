package reconcile_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-logr/logr/testr"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/rest"

	"github.com/watchjournal/watchjournal/journal"
	"github.com/watchjournal/watchjournal/reconcile"
)

// fabricatedStream serves a streaming list whose initial events are the
// frames given, in that order, then the initial-events-end bookmark, and
// holds the watch open; discovery answers for configmaps. Anything else is
// a 500. It counts the streaming lists it served.
func fabricatedStream(t *testing.T, frames []string, bookmarkRV string) (*httptest.Server, *atomic.Int32) {
	t.Helper()
	end := fmt.Sprintf(`{"type":"BOOKMARK","object":{"kind":"ConfigMap","apiVersion":"v1","metadata":{"resourceVersion":%q,"annotations":{"k8s.io/initial-events-end":"true"}}}}`, bookmarkRV)
	return fabricatedServer(t, append(frames, end), "")
}

// fabricatedServer serves a streaming list of the frames given (and holds
// it open), discovery, plain watches (held open), and list as the body
// given ("": a 500).
func fabricatedServer(t *testing.T, frames []string, list string) (*httptest.Server, *atomic.Int32) {
	t.Helper()
	var streams atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		q := r.URL.Query()
		switch {
		case r.URL.Path == "/api/v1":
			fmt.Fprint(w, `{"kind":"APIResourceList","apiVersion":"v1","groupVersion":"v1","resources":[{"name":"configmaps","singularName":"configmap","namespaced":true,"kind":"ConfigMap","verbs":["list","watch"]}]}`)
		case q.Get("sendInitialEvents") == "true":
			streams.Add(1)
			for _, f := range frames {
				fmt.Fprintln(w, f)
			}
			w.(http.Flusher).Flush()
			<-r.Context().Done()
		case q.Get("watch") == "true":
			<-r.Context().Done()
		case list != "":
			fmt.Fprint(w, list)
		default:
			http.Error(w, "not fabricated", http.StatusInternalServerError)
		}
	}))
	t.Cleanup(srv.Close)
	return srv, &streams
}

// fabricatedJournal opens a journal of configmaps in namespace ns, closed
// with the test.
func fabricatedJournal(t *testing.T) *journal.Journal {
	t.Helper()
	res := journal.Resource{GVR: schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}, Namespace: "ns"}
	j, err := journal.Open(filepath.Join(t.TempDir(), "j.db"), &journal.Options{Resource: &res, NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { j.Close() })
	return j
}

// runFirstList runs a loop with opts, logging to t, over j against srv
// until its first list is done, then stops it; it returns the loop.
func runFirstList(t *testing.T, srv *httptest.Server, j *journal.Journal, opts reconcile.Options) *reconcile.Loop {
	t.Helper()
	opts.Logger = testr.New(t)
	l, err := reconcile.New(&rest.Config{Host: srv.URL}, j, opts)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- l.Run(ctx) }()
	wctx, wcancel := context.WithTimeout(ctx, 30*time.Second)
	defer wcancel()
	if err := l.WaitFor(wctx, func(s reconcile.Status) bool { return s.Lists == 1 }); err != nil {
		t.Fatalf("waiting for the list: %v; status %+v", err, l.Status())
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("Run = %v", err)
	}
	return l
}

// typeNameUIDs returns "TYPE name UID" for each of evs, in namespace ns.
func typeNameUIDs(evs []journal.Event) []string {
	var got []string
	for _, e := range evs {
		got = append(got, fmt.Sprintf("%s %s %s", e.Type, strings.TrimPrefix(e.Key, "ns/"), e.UID))
	}
	return got
}

func added(name, uid, rv string) string {
	return fmt.Sprintf(`{"type":"ADDED","object":{"kind":"ConfigMap","apiVersion":"v1","metadata":{"name":%q,"namespace":"ns","uid":%q,"resourceVersion":%q}}}`, name, uid, rv)
}

// Initial events out of key order (the API does not promise the order the
// watch cache keeps) still give exactly the right events and index: the
// loop sees the order break and streams again with lookups. The index held
// a..d; the server has d changed, b as is, e new, a recreated (new UID),
// and no c.
func TestLoop_StreamingList_OutOfOrderInitialEvents(t *testing.T) {
	srv, streams := fabricatedStream(t, []string{
		added("d", "uid-d", "20"), added("b", "uid-b", "2"), added("e", "uid-e", "21"), added("a", "uid-a2", "22"),
	}, "30")
	j := fabricatedJournal(t)
	err := j.Writer().Update(func(tx *journal.Tx) error {
		for i, n := range []string{"a", "b", "c", "d"} {
			e := journal.Event{Type: journal.Added, Key: "ns/" + n, UID: "uid-" + n, ResourceVersion: fmt.Sprint(i + 1),
				Object: []byte(`{}`), Origin: journal.OriginRelist}
			if _, err := tx.Append(&e); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	runFirstList(t, srv, j, reconcile.Options{PageSize: 2})
	evs, err := j.Read(5, 100)
	if err != nil {
		t.Fatal(err)
	}
	equal(t, "events", typeNameUIDs(evs), []string{"MODIFIED d uid-d", "ADDED e uid-e", "DELETED a uid-a", "ADDED a uid-a2", "DELETED c uid-c"})
	idx, err := j.ScanIndex("", 100)
	if err != nil {
		t.Fatal(err)
	}
	var keys []string
	for _, e := range idx {
		keys = append(keys, fmt.Sprintf("%s %s %s", e.Key, e.UID, e.ResourceVersion))
	}
	equal(t, "index", keys, []string{"ns/a uid-a2 22", "ns/b uid-b 2", "ns/d uid-d 20", "ns/e uid-e 21"})
	if rv, _ := j.ResourceVersion(); rv != "30" {
		t.Errorf("resourceVersion = %q; want the bookmark's 30", rv)
	}
	if n := streams.Load(); n != 2 {
		t.Errorf("%d streaming lists; want 2 (the first broke key order)", n)
	}
}

// A server that ignores sendInitialEvents (before v1.27) answers a
// streaming list as a watch from "now": ADDEDs, then bookmarks without the
// k8s.io/initial-events-end annotation. The loop takes it as a refusal and
// lists in pages; nothing of the stream is journaled.
func TestLoop_StreamingList_IgnoredByServer_FallsBackToPages(t *testing.T) {
	srv, streams := fabricatedServer(t, []string{
		added("a", "uid-a", "3"),
		`{"type":"BOOKMARK","object":{"kind":"ConfigMap","apiVersion":"v1","metadata":{"resourceVersion":"4"}}}`,
	}, `{"kind":"ConfigMapList","apiVersion":"v1","metadata":{"resourceVersion":"5"},"items":[`+
		`{"metadata":{"name":"a","namespace":"ns","uid":"uid-a","resourceVersion":"3"}},`+
		`{"metadata":{"name":"b","namespace":"ns","uid":"uid-b","resourceVersion":"5"}}]}`)
	j := fabricatedJournal(t)
	l := runFirstList(t, srv, j, reconcile.Options{})
	st := l.Status()
	if st.ListMode != reconcile.ListModePaginated || !strings.Contains(st.ListModeReason, "ignores sendInitialEvents") {
		t.Errorf("Status.ListMode = %q, reason %q; want paginated, the server ignores sendInitialEvents", st.ListMode, st.ListModeReason)
	}
	evs, err := j.Read(1, 100)
	if err != nil {
		t.Fatal(err)
	}
	equal(t, "events", typeNameUIDs(evs), []string{"ADDED a uid-a", "ADDED b uid-b"})
	if rv, _ := j.ResourceVersion(); rv != "5" || streams.Load() != 1 {
		t.Errorf("resourceVersion %q after %d streaming lists; want the list's 5 after 1", rv, streams.Load())
	}
}

// A server that ignores sendInitialEvents and has nothing to send (an
// empty collection: a watch from now) sends no frame: after
// ProgressTimeout the loop takes it as a refusal and lists in pages,
// instead of waiting for a bookmark that never comes.
func TestLoop_StreamingList_NoFrame_FallsBackToPages(t *testing.T) {
	srv, streams := fabricatedServer(t, nil, `{"kind":"ConfigMapList","apiVersion":"v1","metadata":{"resourceVersion":"5"},"items":[]}`)
	j := fabricatedJournal(t)
	l := runFirstList(t, srv, j, reconcile.Options{ProgressTimeout: 300 * time.Millisecond})
	st := l.Status()
	if st.ListMode != reconcile.ListModePaginated || !strings.Contains(st.ListModeReason, "ProgressTimeout") || streams.Load() != 1 {
		t.Errorf("Status.ListMode = %q, reason %q after %d streaming lists; want paginated, no frame within ProgressTimeout, after 1",
			st.ListMode, st.ListModeReason, streams.Load())
	}
	if rv, _ := j.ResourceVersion(); rv != "5" {
		t.Errorf("resourceVersion %q; want the list's 5", rv)
	}
}
