package reconcile

// Replays of responses recorded from a real kube-apiserver v1.37
// (testdata/apiserver, written by go run ./internal/testing/recordapiserver): the
// page decoder, the watch frame decoder and Diff get the bytes the server
// really sends, and their results are checked against the same bytes
// decoded independently with encoding/json and the API types, and against
// what the recorder did (which objects, which changes). UIDs and
// resourceVersions are whatever the recording holds; the tests read them
// from the files.

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"testing"
	"testing/iotest"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/watchjournal/watchjournal/journal"
)

const recordedDir = "../testdata/apiserver"

// recordedNS is the namespace the recorder used.
const recordedNS = "wj-rec"

func readRecorded(t *testing.T, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(recordedDir, name))
	if err != nil {
		t.Fatalf("%v (record the file with go run ./internal/testing/recordapiserver)", err)
	}
	return b
}

// servedList is a list page decoded with encoding/json, independently of
// the decoder under test.
type servedList struct {
	Kind       string          `json:"kind"`
	APIVersion string          `json:"apiVersion"`
	Metadata   metav1.ListMeta `json:"metadata"`
	Items      []json.RawMessage
}

func servedItem(t *testing.T, raw []byte) (Item, metav1.ObjectMeta) {
	t.Helper()
	var o struct {
		Metadata metav1.ObjectMeta `json:"metadata"`
	}
	if err := json.Unmarshal(raw, &o); err != nil {
		t.Fatal(err)
	}
	key := o.Metadata.Name
	if o.Metadata.Namespace != "" {
		key = o.Metadata.Namespace + "/" + key
	}
	return Item{Key: key, UID: string(o.Metadata.UID), ResourceVersion: o.Metadata.ResourceVersion}, o.Metadata
}

// keysOf returns the keys of items.
func keysOf(items []Item) []string {
	var out []string
	for _, it := range items {
		out = append(out, it.Key)
	}
	return out
}

// decodeRecordedPage runs decodePage on b, from a reader that hands over
// one byte at a time as a slow stream would.
func decodeRecordedPage(t *testing.T, b []byte, meta bool) (*page, string, []Item) {
	t.Helper()
	var items []Item
	p, kind, err := (&client{}).decodePage(iotest.OneByteReader(bytes.NewReader(b)), meta, func(it Item) error { items = append(items, it); return nil })
	if err != nil {
		t.Fatalf("decodePage: %v", err)
	}
	return p, kind, items
}

// Full list pages (a paginated list and an unpaginated one): each decodes
// to the list's resourceVersion and continue token and to its items, in
// order, with key, UID and resourceVersion as served, and each object as
// served plus the kind and apiVersion the list items lack.
func TestRecorded_ListPages_DecodeAsServed(t *testing.T) {
	for _, tc := range []struct {
		file      string
		names     []string
		continues bool
	}{
		{"list-page1.json", []string{"a", "b"}, true},
		{"list-page2.json", []string{"kind"}, false},
		{"list-after-watch.json", []string{"a", "c", "kind"}, false},
	} {
		t.Run(tc.file, func(t *testing.T) {
			b := readRecorded(t, tc.file)
			var want servedList
			if err := json.Unmarshal(b, &want); err != nil {
				t.Fatal(err)
			}
			p, kind, items := decodeRecordedPage(t, b, false)
			if kind != "ConfigMapList" || want.Kind != kind {
				t.Errorf("kind %q; want ConfigMapList (served %q)", kind, want.Kind)
			}
			if p.ResourceVersion != want.Metadata.ResourceVersion || p.ResourceVersion == "" {
				t.Errorf("resourceVersion %q; want %q", p.ResourceVersion, want.Metadata.ResourceVersion)
			}
			if p.Continue != want.Metadata.Continue || (p.Continue != "") != tc.continues {
				t.Errorf("continue %q; want %q (a token: %v)", p.Continue, want.Metadata.Continue, tc.continues)
			}
			var wantKeys []string
			for _, n := range tc.names {
				wantKeys = append(wantKeys, recordedNS+"/"+n)
			}
			if got := keysOf(items); !reflect.DeepEqual(got, wantKeys) || len(want.Items) != len(items) {
				t.Fatalf("items %q; want %q (%d served)", got, wantKeys, len(want.Items))
			}
			for i, it := range items {
				served, _ := servedItem(t, want.Items[i])
				if it.Key != served.Key || it.UID != served.UID || it.ResourceVersion != served.ResourceVersion || it.UID == "" {
					t.Errorf("item %d = %s %s %s; served %s %s %s", i, it.Key, it.UID, it.ResourceVersion, served.Key, served.UID, served.ResourceVersion)
				}
				var obj, wantObj map[string]any
				if err := json.Unmarshal(it.Object, &obj); err != nil {
					t.Fatalf("item %s: stored object does not decode: %v", it.Key, err)
				}
				_ = json.Unmarshal(want.Items[i], &wantObj)
				wantObj["kind"], wantObj["apiVersion"] = "ConfigMap", "v1"
				if !reflect.DeepEqual(obj, wantObj) {
					t.Errorf("item %s: stored object\n%s\nwant the served one with kind ConfigMap and apiVersion v1:\n%s", it.Key, it.Object, want.Items[i])
				}
			}
		})
	}
	// A continue token carries its list's resourceVersion: both pages are
	// one snapshot.
	var p1, p2 servedList
	_ = json.Unmarshal(readRecorded(t, "list-page1.json"), &p1)
	_ = json.Unmarshal(readRecorded(t, "list-page2.json"), &p2)
	if p1.Metadata.ResourceVersion != p2.Metadata.ResourceVersion {
		t.Errorf("page 2 resourceVersion %q differs from page 1's %q", p2.Metadata.ResourceVersion, p1.Metadata.ResourceVersion)
	}
}

// A metadata-only page (PartialObjectMetadataList) decodes to its items'
// keys, UIDs and resourceVersions, equal to the full page's, and keeps no
// object.
func TestRecorded_MetadataPage_DecodesKeysOnly(t *testing.T) {
	b := readRecorded(t, "list-metadata-page1.json")
	p, kind, items := decodeRecordedPage(t, b, true)
	if kind != "PartialObjectMetadataList" {
		t.Fatalf("kind %q; want PartialObjectMetadataList", kind)
	}
	_, _, full := decodeRecordedPage(t, readRecorded(t, "list-page1.json"), false)
	var want servedList
	_ = json.Unmarshal(b, &want)
	if p.ResourceVersion != want.Metadata.ResourceVersion || p.Continue != want.Metadata.Continue || p.Continue == "" {
		t.Errorf("page rv %q continue %q; served %q %q", p.ResourceVersion, p.Continue, want.Metadata.ResourceVersion, want.Metadata.Continue)
	}
	if len(items) != len(full) {
		t.Fatalf("%d items; the full page has %d", len(items), len(full))
	}
	for i, it := range items {
		if it.Object != nil {
			t.Errorf("item %s keeps an object of %d bytes", it.Key, len(it.Object))
		}
		if it.Key != full[i].Key || it.UID != full[i].UID || it.ResourceVersion != full[i].ResourceVersion {
			t.Errorf("item %d = %s %s %s; full page %s %s %s", i, it.Key, it.UID, it.ResourceVersion, full[i].Key, full[i].UID, full[i].ResourceVersion)
		}
	}
}

// recordedFrames reads a recorded watch stream with the stream decoder, to
// its end.
func recordedFrames(t *testing.T, name string) []watchEvent {
	t.Helper()
	r := iotest.OneByteReader(bytes.NewReader(readRecorded(t, name)))
	s := newStream(io.NopCloser(r), func() {})
	var out []watchEvent
	for {
		ev, err := s.next()
		if errors.Is(err, io.EOF) {
			return out
		}
		if err != nil {
			t.Fatalf("%s: frame %d: %v", name, len(out)+1, err)
		}
		out = append(out, ev)
	}
}

// A watch with sendInitialEvents: the initial ADDED events, the BOOKMARK
// that ends them (annotation k8s.io/initial-events-end) with a
// resourceVersion, then ADDED c, MODIFIED a, DELETED b as the recorder made
// them. Each object frame decodes to the key, UID and resourceVersion
// served, and the object keeps its kind.
func TestRecorded_WatchStream_DecodesEveryFrame(t *testing.T) {
	frames := recordedFrames(t, "watch-events.json")
	var got []string
	for _, f := range frames {
		switch f.Type {
		case "BOOKMARK":
			rv, ok := bookmarkRV(f.Object)
			var o struct {
				Metadata metav1.ObjectMeta `json:"metadata"`
			}
			_ = json.Unmarshal(f.Object, &o)
			if !ok || rv != o.Metadata.ResourceVersion || rv == "" {
				t.Errorf("bookmarkRV = %q, %v; served %q", rv, ok, o.Metadata.ResourceVersion)
			}
			if o.Metadata.Annotations[metav1.InitialEventsAnnotationKey] != "true" {
				t.Errorf("the bookmark has no %s annotation: %s", metav1.InitialEventsAnnotationKey, f.Object)
			}
			got = append(got, "BOOKMARK")
		default:
			it, err := (&client{}).item(f.Object, "", "")
			if err != nil {
				t.Fatalf("%s frame: %v", f.Type, err)
			}
			served, _ := servedItem(t, f.Object)
			if it.Key != served.Key || it.UID != served.UID || it.ResourceVersion != served.ResourceVersion {
				t.Errorf("%s %s %s %s; served %s %s %s", f.Type, it.Key, it.UID, it.ResourceVersion, served.Key, served.UID, served.ResourceVersion)
			}
			if !bytes.Equal(it.Object, f.Object) {
				t.Errorf("%s %s: the stored object is not the served one", f.Type, it.Key)
			}
			got = append(got, f.Type+" "+it.Key)
		}
	}
	want := []string{"ADDED wj-rec/a", "ADDED wj-rec/b", "ADDED wj-rec/kind", "BOOKMARK",
		"ADDED wj-rec/c", "MODIFIED wj-rec/a", "DELETED wj-rec/b"}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("frames %q; want %q", got, want)
	}
}

// A watch from a compacted resourceVersion: one ERROR frame whose Status is
// a 410, which the loop takes for a relist.
func TestRecorded_WatchGone_IsA410(t *testing.T) {
	frames := recordedFrames(t, "watch-gone.json")
	if len(frames) != 1 || frames[0].Type != "ERROR" {
		t.Fatalf("frames %+v; want one ERROR", frames)
	}
	st := decodeStatus(frames[0].Object)
	if st.Code != 410 || st.Reason != metav1.StatusReasonExpired || !statusIsGone(st) {
		t.Fatalf("status %+v (statusIsGone %v); want code 410, reason Expired, gone", st, statusIsGone(st))
	}
}

// The changes between two recorded lists: Diff of the paginated list (as
// the index) against the list after the watch gives exactly the watched
// changes, in key order (MODIFIED a, DELETED b, ADDED c), with the
// resourceVersions and UIDs the watch carried; folding the watch's frames
// onto the same index gives the same state.
func TestRecorded_DiffOfListsEqualsWatchedChanges(t *testing.T) {
	_, _, p1 := decodeRecordedPage(t, readRecorded(t, "list-page1.json"), false)
	_, _, p2 := decodeRecordedPage(t, readRecorded(t, "list-page2.json"), false)
	_, _, after := decodeRecordedPage(t, readRecorded(t, "list-after-watch.json"), false)
	var index []journal.IndexEntry
	state := map[string]journal.IndexEntry{}
	for _, it := range append(p1, p2...) {
		e := journal.IndexEntry{Key: it.Key, UID: it.UID, ResourceVersion: it.ResourceVersion}
		index = append(index, e)
		state[it.Key] = e
	}
	got := Diff(index, after)

	frames := recordedFrames(t, "watch-events.json")
	var changes []Item
	var types []journal.EventType
	for _, f := range frames[4:] { // after the initial events and the bookmark
		it, err := (&client{}).item(f.Object, "", "")
		if err != nil {
			t.Fatal(err)
		}
		changes = append(changes, it)
		types = append(types, journal.EventType(f.Type))
	}
	c, a, b := changes[0], changes[1], changes[2]
	want := []string{
		"MODIFIED " + a.Key + " " + a.UID + " " + a.ResourceVersion + " prev " + state[a.Key].ResourceVersion,
		"DELETED " + b.Key + " " + state[b.Key].UID + " " + state[b.Key].ResourceVersion + " prev ",
		"ADDED " + c.Key + " " + c.UID + " " + c.ResourceVersion + " prev ",
	}
	var gotS []string
	for _, e := range got {
		gotS = append(gotS, string(e.Type)+" "+e.Key+" "+e.UID+" "+e.ResourceVersion+" prev "+e.PrevResourceVersion)
	}
	if !reflect.DeepEqual(gotS, want) {
		t.Fatalf("Diff = %q; want %q", gotS, want)
	}

	for i, it := range changes {
		cur, present := state[it.Key]
		for _, e := range Fold(cur, present, types[i], it) {
			if e.Type == journal.Deleted {
				delete(state, e.Key)
			} else {
				state[e.Key] = journal.IndexEntry{Key: e.Key, UID: e.UID, ResourceVersion: e.ResourceVersion}
			}
		}
	}
	if len(state) != len(after) {
		t.Fatalf("state after folding the watch has %d keys; the list after it %d", len(state), len(after))
	}
	for _, it := range after {
		if e := state[it.Key]; e.UID != it.UID || e.ResourceVersion != it.ResourceVersion {
			t.Errorf("after folding the watch %s = %+v; the list says %s %s", it.Key, e, it.UID, it.ResourceVersion)
		}
	}
}

// A watch from the compaction revision less one: one ERROR frame with the
// apiserver's "PrevKv=nil" 500 (the event at the compaction revision lost
// its previous value). It is not a 410, yet the server will answer it for
// that resourceVersion forever: the loop relists for it, recognising it
// by this shape.
func TestRecorded_WatchPrevKvNil_IsA500(t *testing.T) {
	frames := recordedFrames(t, "watch-prevkv-nil.json")
	if len(frames) != 1 || frames[0].Type != "ERROR" {
		t.Fatalf("frames %+v; want one ERROR", frames)
	}
	st := decodeStatus(frames[0].Object)
	if st.Code != 500 || st.Reason != metav1.StatusReasonInternalError || !bytes.Contains([]byte(st.Message), []byte("PrevKv=nil")) || statusIsGone(st) {
		t.Fatalf("status %+v; want code 500, reason InternalError, a PrevKv=nil message, not gone", st)
	}
}
