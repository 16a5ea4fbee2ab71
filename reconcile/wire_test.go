package reconcile

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"io"
	"testing"
	"testing/iotest"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"

	"github.com/watchjournal/watchjournal/journal"
)

// protoFrame encodes obj (kind and apiVersion given) as one frame of a
// protobuf watch stream, as the apiserver does: a length-delimited
// metav1.WatchEvent whose object is the k8s protobuf envelope.
func protoFrame(t testing.TB, typ, apiVersion, kind string, obj interface{ Marshal() ([]byte, error) }) []byte {
	t.Helper()
	raw, err := obj.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	u := runtime.Unknown{TypeMeta: runtime.TypeMeta{APIVersion: apiVersion, Kind: kind}, Raw: raw}
	ub, err := u.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	ev := metav1.WatchEvent{Type: typ, Object: runtime.RawExtension{Raw: append(append([]byte(nil), protoMagic...), ub...)}}
	eb, err := ev.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	out := binary.BigEndian.AppendUint32(nil, uint32(len(eb)))
	return append(out, eb...)
}

func testConfigMap() *corev1.ConfigMap {
	return &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: "a", Namespace: "ns", UID: types.UID("0b6a3f7e-1d2c-4c1e-9f50-5a1b2c3d4e5f"),
			ResourceVersion: "42", Labels: map[string]string{"app": "x<y>&z"}},
		Data:       map[string]string{"k": "v", "ü": "\u00e9"},
		BinaryData: map[string][]byte{"b": {0, 1, 2, 255}},
	}
}

// A protobuf watch stream reads frame by frame like a JSON one: io.EOF at
// an end between frames, io.ErrUnexpectedEOF inside one, ErrFrameTooLarge
// past the bound, the connection's error as it is. Each object comes as
// its protobuf envelope, whose key, UID and resourceVersion protoItem
// reads; the Item's Object is the envelope as sent (what the journal
// stores), and journal.ObjectJSON turns it into JSON equal to
// encoding/json's of the typed object (what the apiserver's JSON
// serializer writes).
func TestStream_NextProto(t *testing.T) {
	cm := testConfigMap()
	frame := protoFrame(t, "ADDED", "v1", "ConfigMap", cm)
	want := cm.DeepCopy()
	want.Kind, want.APIVersion = "ConfigMap", "v1"
	wantJSON, err := json.Marshal(want)
	if err != nil {
		t.Fatal(err)
	}
	reset := errors.New("connection reset")
	two := append(append([]byte(nil), frame...), frame...)
	for _, tc := range []struct {
		name   string
		body   func() io.Reader
		frames int
		err    error
	}{
		{"two frames then EOF", func() io.Reader { return bytes.NewReader(two) }, 2, io.EOF},
		{"one byte at a time", func() io.Reader { return iotest.OneByteReader(bytes.NewReader(two)) }, 2, io.EOF},
		{"cut inside a frame", func() io.Reader { return bytes.NewReader(append(append([]byte(nil), frame...), frame[:20]...)) }, 1, io.ErrUnexpectedEOF},
		{"cut inside a length", func() io.Reader { return bytes.NewReader(append(append([]byte(nil), frame...), frame[:2]...)) }, 1, io.ErrUnexpectedEOF},
		{"a length past the bound", func() io.Reader {
			return bytes.NewReader(append(append([]byte(nil), frame...), 0, 0xff, 0xff, 0xff))
		}, 1, ErrFrameTooLarge},
		{"reset", func() io.Reader {
			return io.MultiReader(bytes.NewReader(frame), bytes.NewReader(frame[:10]), iotest.ErrReader(reset))
		}, 1, reset},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := newStreamSize(io.NopCloser(tc.body()), func() {}, 1<<20, 16)
			readFrames(t, s, tc.frames, tc.err, func(n int, ev watchEvent) {
				if ev.Type != "ADDED" {
					t.Fatalf("frame %d: type %q", n, ev.Type)
				}
				if ev.Object != nil || ev.proto == nil {
					t.Fatalf("frame %d: Object %q, proto %v; want the protobuf object only", n, ev.Object, ev.proto)
				}
				it, err := protoItem(*ev.proto)
				if err != nil || it.Key != "ns/a" || it.UID != string(cm.UID) || it.ResourceVersion != "42" {
					t.Fatalf("protoItem = %+v, %v", it, err)
				}
				// The envelope as the frame carried it: WatchEvent field 2
				// (RawExtension), its field 1.
				if env := frame[len(frame)-len(it.Object):]; !bytes.HasPrefix(it.Object, protoMagic) || !bytes.Equal(it.Object, env) {
					t.Fatalf("frame %d: Item.Object is not the envelope as sent:\n got %q\nwant %q", n, it.Object, env)
				}
				got, err := journal.ObjectJSON(it.Object)
				if err != nil || !bytes.Equal(got, wantJSON) {
					t.Fatalf("frame %d: ObjectJSON: %v\n got %s\nwant %s", n, err, got, wantJSON)
				}
			})
		})
	}
}

// BOOKMARK and ERROR frames come in JSON: the
// initial-events-end annotation and a 410 Status read as before.
func TestStream_ProtoBookmarkAndError(t *testing.T) {
	bm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{ResourceVersion: "77", Annotations: map[string]string{initialEventsEnd: "true"}}}
	st := &metav1.Status{Status: metav1.StatusFailure, Code: 410, Reason: metav1.StatusReasonExpired, Message: "too old resource version: 1 (77)"}
	body := append(protoFrame(t, "BOOKMARK", "v1", "ConfigMap", bm), protoFrame(t, "ERROR", "v1", "Status", st)...)
	s := newStream(io.NopCloser(bytes.NewReader(body)), func() {})
	ev, err := s.next()
	if err != nil || ev.Type != "BOOKMARK" {
		t.Fatalf("next = %+v, %v", ev, err)
	}
	if rv, end := bookmarkEnd(ev.Object); rv != "77" || !end {
		t.Fatalf("bookmarkEnd(%s) = %q, %v", ev.Object, rv, end)
	}
	ev, err = s.next()
	if err != nil || ev.Type != "ERROR" {
		t.Fatalf("next = %+v, %v", ev, err)
	}
	if got := decodeStatus(ev.Object); !statusIsGone(got) || got.Message != st.Message {
		t.Fatalf("decodeStatus(%s) = %+v; want the 410", ev.Object, got)
	}
}

// Undecodable protobuf is an error, never an item: no envelope, a kind
// the scheme does not know, metadata without a UID, bytes that are not
// protobuf.
func TestProtoItem_Errors(t *testing.T) {
	if _, err := unwrapProto([]byte("{}")); err == nil {
		t.Error("unwrapProto of JSON: no error")
	}
	if _, err := protoItem(protoObject{gvk: corev1.SchemeGroupVersion.WithKind("NoSuchKind"), raw: nil}); err == nil {
		t.Error("protoItem of an unknown kind: no error")
	}
	noUID, _ := (&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "a", ResourceVersion: "1"}}).Marshal()
	if _, err := protoItem(protoObject{gvk: corev1.SchemeGroupVersion.WithKind("ConfigMap"), raw: noUID}); err == nil {
		t.Error("protoItem without a UID: no error")
	}
	if _, err := protoItem(protoObject{gvk: corev1.SchemeGroupVersion.WithKind("ConfigMap"), raw: []byte{0x0a, 0xff}}); err == nil {
		t.Error("protoItem of truncated bytes: no error")
	}
	if _, err := protoJSON(protoObject{gvk: corev1.SchemeGroupVersion.WithKind("ConfigMap"), raw: []byte{0x0a, 0xff}}); err == nil {
		t.Error("protoJSON of truncated bytes: no error")
	}
}

// Every kind of client-go's scheme whose Go type has ObjectMeta keeps it
// at protobuf field 1: metaFirst holds for the kinds the loop meets.
func TestMetaFirst(t *testing.T) {
	for _, k := range []string{"ConfigMap", "Pod", "Service", "Secret", "Node", "Namespace", "Event"} {
		if !metaFirst(corev1.SchemeGroupVersion.WithKind(k)) {
			t.Errorf("metaFirst(%s) = false", k)
		}
	}
	if metaFirst(corev1.SchemeGroupVersion.WithKind("ConfigMapList")) {
		t.Error("metaFirst(ConfigMapList) = true: its metadata is ListMeta")
	}
}

// FuzzProtoFrame: any bytes as a protobuf watch stream end in an error or
// in frames whose objects decode to an item and JSON (protoJSON, and
// journal.ObjectJSON of the stored envelope) or to an error; never
// a panic, never an item without a key, UID and resourceVersion.
func FuzzProtoFrame(f *testing.F) {
	f.Add(protoFrame(f, "ADDED", "v1", "ConfigMap", testConfigMap()))
	f.Add(protoFrame(f, "BOOKMARK", "v1", "ConfigMap", &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{ResourceVersion: "7"}}))
	f.Add(protoFrame(f, "ERROR", "v1", "Status", &metav1.Status{Code: 410}))
	f.Fuzz(func(t *testing.T, b []byte) {
		s := newStreamSize(io.NopCloser(bytes.NewReader(append([]byte{0}, b...))), func() {}, 1<<20, 64)
		for i := 0; i < 16; i++ {
			ev, err := s.next()
			if err != nil {
				return
			}
			if ev.proto == nil {
				continue
			}
			it, err := protoItem(*ev.proto)
			if err != nil {
				continue
			}
			if it.Key == "" || it.UID == "" || it.ResourceVersion == "" {
				t.Fatalf("protoItem = %+v without error", it)
			}
			_, _ = protoJSON(*ev.proto)
			_, _ = journal.ObjectJSON(it.Object)
		}
	})
}
