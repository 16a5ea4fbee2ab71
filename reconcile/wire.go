package reconcile

// Protobuf on the wire and on disk for built-in kinds; JSON for the rest.
//
// For the built-in kinds client-go knows (its kubernetes/scheme), watches
// and streaming lists ask for protobuf, as client-go's typed clients and
// informers do (gentype.PrefersProtobuf): the apiserver encodes protobuf
// with about half the CPU of JSON, and the apiserver's encoding, not the
// client, bounds how fast a list arrives (BENCHMARKS.md).
//
// A frame is a watch event (metav1.WatchEvent, length-delimited: 4 bytes
// big-endian, then the message) whose object is the protobuf envelope
// ("k8s\x00", runtime.Unknown with apiVersion and kind). Its key, UID and
// resourceVersion are read from the bytes of metadata (field 1 of every
// built-in kind, checked per kind by reflection) without decoding the
// object, and the journal stores the envelope as the server sent it
// (Item.Object, journal.Event.Object): nothing is decoded or converted on
// the way in. Readers decode it with the generated protobuf code
// (journal/internal/storedobj: typed, PartialObjectMetadata from the
// metadata bytes only, unstructured through the typed object), and
// journal.ObjectJSON gives the JSON the apiserver would have served
// (journalctl prints that). The first bytes of a stored object say which
// encoding it is ("k8s\x00" or '{'), so one file may hold both; a file
// that may hold protobuf has schema 4 (journal/bolt), which older builds
// refuse.
//
// What is stored, by kind:
//
//   - built-in kinds (client-go's scheme) from a watch or a streaming
//     list, with Options.Wire = WireAuto: protobuf;
//   - the same kinds from a paginated list, a lookup or a verify: JSON
//     (their decoder reads pages field by field as they stream,
//     client.go); a file therefore mixes both after such a list;
//   - custom resources and aggregated APIs (served in JSON only),
//     metadata-only journals (PartialObjectMetadata), and everything with
//     Options.Wire = WireJSON: JSON, every field as served.
//
// What it costs: fields the compiled-in types do not know (a server newer
// than this client-go) are kept in the bytes but dropped by every decode,
// as a typed informer drops them; WireJSON keeps them readable. A server
// that answers a protobuf request in JSON is read as JSON: the first byte
// of the body tells (a protobuf frame's length starts with 0x00 below 16
// MiB, JSON with '{'). BOOKMARK and ERROR frames are converted to JSON
// (protoJSON), which bookmarkRV and decodeStatus read; they never enter
// the journal.

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"reflect"
	"strings"
	"sync"

	"google.golang.org/protobuf/encoding/protowire"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes/scheme"

	"github.com/watchjournal/watchjournal/internal/protofields"
	"github.com/watchjournal/watchjournal/journal"
)

// Wire chooses the encoding of watch responses (Options.Wire).
type Wire string

// Wire encodings.
const (
	// WireAuto is protobuf for the built-in kinds client-go's scheme
	// knows, JSON for the rest.
	WireAuto Wire = ""
	// WireJSON is JSON always, on the wire and on disk: every field is
	// stored and read as served, also fields this build's types do not
	// know.
	WireJSON Wire = "json"
)

// protoWatchAccept asks for a protobuf watch stream, JSON where the
// resource has none.
const protoWatchAccept = "application/vnd.kubernetes.protobuf;stream=watch, application/json"

// protoMagic begins every protobuf-encoded object (k8s.io/apimachinery's
// protobuf serializer).
var protoMagic = []byte{0x6b, 0x38, 0x73, 0x00}

// servesProto reports whether the group version of gvr has built-in kinds
// in client-go's scheme, so that the apiserver serves it in protobuf.
func servesProto(gvr schema.GroupVersionResource) bool {
	return scheme.Scheme.IsVersionRegistered(gvr.GroupVersion())
}

// protoKnown reports whether client-go's scheme knows the kind j records,
// so that objects stored in protobuf can be decoded again (and shown as
// JSON): servesProto chooses by group version, and a server newer than
// this build can serve a kind of a built-in group version that the scheme
// lacks. Such a kind is watched in JSON. True when j records no kind yet
// (New's discovery failed and Run retries it): the choice stays by group
// version.
func protoKnown(j *journal.Journal) bool {
	res, ok, err := j.Resource()
	if err != nil || !ok || res.Kind == "" {
		return true
	}
	return scheme.Scheme.Recognizes(res.GVR.GroupVersion().WithKind(res.Kind))
}

// checkProto turns protobuf off for the loop's next requests when the
// kind the journal records is one the scheme lacks (protoKnown): in New,
// and again once the kind's retry recorded it. A request already open goes
// on until it fails to decode (ErrDecode), and its retry asks for JSON.
func (l *Loop) checkProto() {
	if l.c.proto.Load() && !protoKnown(l.j) {
		l.c.proto.Store(false)
	}
}

// protoObject is an object as a protobuf frame carried it: its kind, the
// bytes of its message, and the whole envelope (what the journal stores).
type protoObject struct {
	gvk schema.GroupVersionKind
	raw []byte
	env []byte
}

// readProtoEvent reads one length-delimited protobuf watch frame from r.
// It returns io.EOF when r ended before the frame, io.ErrUnexpectedEOF
// inside it, ErrFrameTooLarge for a length past max bytes.
func readProtoEvent(r io.Reader, max int64) (string, protoObject, error) {
	var hdr [4]byte
	if _, err := io.ReadFull(r, hdr[:]); err != nil {
		return "", protoObject{}, err
	}
	n := binary.BigEndian.Uint32(hdr[:])
	if int64(n) > max {
		return "", protoObject{}, fmt.Errorf("%w: a frame of %d bytes, more than %d", ErrFrameTooLarge, n, max)
	}
	frame := make([]byte, n)
	if _, err := io.ReadFull(r, frame); err != nil {
		if err == io.EOF {
			err = io.ErrUnexpectedEOF
		}
		return "", protoObject{}, err
	}
	typ, obj, err := parseWatchEvent(frame)
	if err != nil {
		return "", protoObject{}, err
	}
	o, err := unwrapProto(obj)
	if err != nil {
		return "", protoObject{}, err
	}
	return typ, o, nil
}

// parseWatchEvent reads a metav1.WatchEvent message (type = 1, object =
// 2, a runtime.RawExtension whose raw = 1) without copying its object.
func parseWatchEvent(b []byte) (typ string, obj []byte, err error) {
	err = protofields.Each(b, func(num protowire.Number, v []byte) error {
		switch num {
		case 1:
			typ = string(v)
		case 2:
			return protofields.Each(v, func(num protowire.Number, v []byte) error {
				if num == 1 {
					obj = v
				}
				return nil
			})
		}
		return nil
	})
	if err != nil {
		return "", nil, fmt.Errorf("reconcile: decode protobuf watch frame: %w", err)
	}
	return typ, obj, nil
}

// unwrapProto reads the protobuf envelope of an object ("k8s\x00", then a
// runtime.Unknown: typeMeta = 1 with apiVersion = 1 and kind = 2, raw = 2)
// without copying the object's message.
func unwrapProto(b []byte) (protoObject, error) {
	if !bytes.HasPrefix(b, protoMagic) {
		return protoObject{}, errors.New("reconcile: decode protobuf object: no k8s protobuf prefix")
	}
	var apiVersion, kind string
	var raw []byte
	err := protofields.Each(b[len(protoMagic):], func(num protowire.Number, v []byte) error {
		switch num {
		case 1:
			return protofields.Each(v, func(num protowire.Number, v []byte) error {
				switch num {
				case 1:
					apiVersion = string(v)
				case 2:
					kind = string(v)
				}
				return nil
			})
		case 2:
			raw = v
		}
		return nil
	})
	if err != nil {
		return protoObject{}, fmt.Errorf("reconcile: decode protobuf object: %w", err)
	}
	gv, err := schema.ParseGroupVersion(apiVersion)
	if err != nil || kind == "" {
		return protoObject{}, fmt.Errorf("reconcile: decode protobuf object: apiVersion %q, kind %q", apiVersion, kind)
	}
	return protoObject{gvk: gv.WithKind(kind), raw: raw, env: b}, nil
}

// protoJSON decodes o into its Go type from client-go's scheme and
// returns it in JSON, with kind and apiVersion, as the apiserver's JSON
// serializer would have sent it (encoding/json). Only BOOKMARK and ERROR
// frames go through it; objects are stored as protobuf.
func protoJSON(o protoObject) ([]byte, error) {
	obj, err := scheme.Scheme.New(o.gvk)
	if err != nil {
		return nil, fmt.Errorf("reconcile: decode protobuf object: %w", err)
	}
	u, ok := obj.(interface{ Unmarshal([]byte) error })
	if !ok {
		return nil, fmt.Errorf("reconcile: decode protobuf object: %v has no protobuf decoder", o.gvk)
	}
	if err := u.Unmarshal(o.raw); err != nil {
		return nil, fmt.Errorf("reconcile: decode protobuf %v: %w", o.gvk, err)
	}
	obj.GetObjectKind().SetGroupVersionKind(o.gvk)
	b, err := json.Marshal(obj)
	if err != nil {
		return nil, fmt.Errorf("reconcile: encode %v as JSON: %w", o.gvk, err)
	}
	return b, nil
}

// protoItem reads the key, UID and resourceVersion of o from the bytes of
// its metadata, without decoding the object; the Item's Object is o's
// envelope, as the server sent it.
func protoItem(o protoObject) (Item, error) {
	if !metaFirst(o.gvk) {
		return Item{}, fmt.Errorf("reconcile: decode protobuf object: %v has no metadata at field 1", o.gvk)
	}
	var name, namespace, uid, rv string
	// ObjectMeta (k8s.io/apimachinery/pkg/apis/meta/v1/generated.proto):
	// name 1, namespace 3, uid 5, resourceVersion 6. A later occurrence
	// of field 1 merges into the first, as in protobuf.
	err := protofields.Each(o.raw, func(num protowire.Number, m []byte) error {
		if num != 1 {
			return nil
		}
		return protofields.Each(m, func(num protowire.Number, v []byte) error {
			switch num {
			case 1:
				name = string(v)
			case 3:
				namespace = string(v)
			case 5:
				uid = string(v)
			case 6:
				rv = string(v)
			}
			return nil
		})
	})
	if err != nil {
		return Item{}, fmt.Errorf("reconcile: decode protobuf %v: %w", o.gvk, err)
	}
	return newItem(name, namespace, uid, rv, o.env)
}

// metaFirstKinds caches metaFirst: schema.GroupVersionKind to bool.
var metaFirstKinds sync.Map

// metaFirst reports whether the Go type of gvk in client-go's scheme has
// its ObjectMeta at protobuf field 1, named metadata (true of every
// built-in kind; checked rather than assumed).
func metaFirst(gvk schema.GroupVersionKind) bool {
	if v, ok := metaFirstKinds.Load(gvk); ok {
		return v.(bool)
	}
	ok := false
	if obj, err := scheme.Scheme.New(gvk); err == nil {
		t := reflect.TypeOf(obj)
		if t.Kind() == reflect.Pointer {
			t = t.Elem()
		}
		if f, found := t.FieldByName("ObjectMeta"); found && f.Type == reflect.TypeOf(metav1.ObjectMeta{}) {
			ok = strings.HasPrefix(f.Tag.Get("protobuf"), "bytes,1,") && strings.HasPrefix(f.Tag.Get("json"), "metadata")
		}
	}
	metaFirstKinds.Store(gvk, ok)
	return ok
}
