package storedobj

// Protobuf as the apiserver sent it.
//
// package reconcile stores a built-in kind's object from a protobuf watch
// or streaming list as it arrived: the Kubernetes protobuf envelope
// ("k8s\x00", then a runtime.Unknown: typeMeta = 1 with apiVersion = 1 and
// kind = 2, raw = 2; k8s.io/apimachinery/pkg/runtime/serializer/protobuf),
// no conversion on the way in. On the way out:
//
//   - Typed decodes raw with the Go type's generated Unmarshal (gogo
//     protobuf, as client-go's protobuf serializer does) when out's type is
//     the type client-go's scheme has for the envelope's kind, and sets
//     kind and apiVersion from the envelope, as the JSON path leaves them
//     (the stored JSON carries them). A *metav1.PartialObjectMetadata
//     decodes only the ObjectMeta message (field 1 of every built-in kind,
//     checked per kind by reflection), the rest of the object is skipped.
//   - Unstructured decodes into the typed object, then converts it with
//     runtime.DefaultUnstructuredConverter: correct (the same map as the
//     JSON the object encodes to, decoded), but a reflection walk slower
//     than decoding JSON; a typed reader is the fast path.
//   - JSON decodes into the typed object and encodes it with encoding/json,
//     as the apiserver's JSON serializer does.
//
// Every failure (an envelope that does not parse, a kind the scheme does
// not know, a Go type that is not the kind's, bytes the generated code
// rejects, or a panic inside it) is an error matching ErrBadObject, never
// a panic.

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"reflect"
	"strings"
	"sync"
	"sync/atomic"

	"google.golang.org/protobuf/encoding/protowire"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes/scheme"

	"github.com/watchjournal/watchjournal/internal/protofields"
)

// ErrBadObject is returned for a stored object that does not decode as its
// encoding says, or not into the Go type asked for.
var ErrBadObject = errors.New("journal: stored object does not decode")

// protoMagic begins every protobuf-encoded object
// (k8s.io/apimachinery/pkg/runtime/serializer/protobuf).
var protoMagic = []byte{0x6b, 0x38, 0x73, 0x00}

// IsProto reports whether a stored object is in Kubernetes protobuf (the
// 4-byte "k8s\x00" prefix); otherwise it is JSON ('{' first).
func IsProto(b []byte) bool { return bytes.HasPrefix(b, protoMagic) }

// envelope is a protobuf object's kind and the bytes of its message.
type envelope struct {
	typeMetaInfo
	raw []byte
}

// parseEnvelope reads the envelope of b (IsProto) without copying the
// object's message. The kind is read from the typeMeta message through
// typeMetaOf's cache when the envelope has one typeMeta (as every
// apiserver's has), else parsed here, later occurrences merging into
// earlier ones as in protobuf.
func parseEnvelope(b []byte) (env envelope, err error) {
	var one [1][]byte
	tms := one[:0]
	err = protofields.Each(b[len(protoMagic):], func(num protowire.Number, v []byte) error {
		switch num {
		case 1:
			tms = append(tms, v)
		case 2:
			env.raw = v
		}
		return nil
	})
	if err != nil {
		return envelope{}, fmt.Errorf("%w: protobuf envelope: %w", ErrBadObject, err)
	}
	if len(tms) == 1 {
		env.typeMetaInfo, err = typeMetaOf(tms[0])
	} else {
		env.typeMetaInfo, err = parseTypeMeta(tms)
	}
	if err != nil {
		return envelope{}, err
	}
	return env, nil
}

// typeMetaInfo is what an envelope's typeMeta message says: the kind, and
// kindOf's answer for it.
type typeMetaInfo struct {
	gvk schema.GroupVersionKind
	ki  kindInfo // kindOf(gvk)'s
}

// typeMetas caches typeMetaOf: the bytes of a typeMeta message to what it
// says, copied on write (read without a lock or an allocation on every
// decode), at most maxTypeMetas entries (one per kind in practice: the
// apiserver encodes a kind's typeMeta the same way every time; more come
// only from odd encodings, which are then parsed per call).
var typeMetas atomic.Pointer[map[string]typeMetaInfo]

const maxTypeMetas = 64

// typeMetaOf parses the typeMeta message tm (apiVersion = 1, kind = 2),
// cached per distinct bytes (typeMetas): the per-call parse cost two
// string allocations and a scheme lookup.
func typeMetaOf(tm []byte) (typeMetaInfo, error) {
	m := typeMetas.Load()
	if m != nil {
		if t, ok := (*m)[string(tm)]; ok {
			return t, nil
		}
	}
	t, err := parseTypeMeta([][]byte{tm})
	if err != nil {
		return t, err
	}
	for m == nil || len(*m) < maxTypeMetas {
		next := map[string]typeMetaInfo{string(tm): t}
		if m != nil {
			maps.Copy(next, *m)
		}
		if typeMetas.CompareAndSwap(m, &next) {
			break
		}
		m = typeMetas.Load()
	}
	return t, nil
}

// parseTypeMeta reads apiVersion and kind from the typeMeta messages tms
// (each later one merging into the earlier) and looks the kind up
// (kindOf).
func parseTypeMeta(tms [][]byte) (typeMetaInfo, error) {
	var apiVersion, kind string
	for _, tm := range tms {
		err := protofields.Each(tm, func(num protowire.Number, v []byte) error {
			switch num {
			case 1:
				apiVersion = string(v)
			case 2:
				kind = string(v)
			}
			return nil
		})
		if err != nil {
			return typeMetaInfo{}, fmt.Errorf("%w: protobuf envelope: %w", ErrBadObject, err)
		}
	}
	gv, err := schema.ParseGroupVersion(apiVersion)
	if err != nil || kind == "" {
		return typeMetaInfo{}, fmt.Errorf("%w: protobuf envelope with apiVersion %q, kind %q", ErrBadObject, apiVersion, kind)
	}
	t := typeMetaInfo{gvk: gv.WithKind(kind)}
	t.ki = kindOf(t.gvk)
	return t, nil
}

// TypeMeta returns the apiVersion and kind of a stored object: the
// envelope's for protobuf, the top-level fields for JSON.
func TypeMeta(b []byte) (apiVersion, kind string, err error) {
	if IsProto(b) {
		env, err := parseEnvelope(b)
		if err != nil {
			return "", "", err
		}
		return env.gvk.GroupVersion().String(), env.gvk.Kind, nil
	}
	var tm struct {
		Kind       string `json:"kind"`
		APIVersion string `json:"apiVersion"`
	}
	if err := json.Unmarshal(b, &tm); err != nil {
		return "", "", err
	}
	return tm.APIVersion, tm.Kind, nil
}

// JSON returns a stored object as the apiserver would have served it in
// JSON: b itself when it is JSON (a JSON object, '{' after any white
// space) or empty, the object decoded into its Go type and encoded with
// encoding/json, kind and apiVersion set, when it is Kubernetes protobuf;
// anything else (a sealed object not opened, damaged bytes) is an error
// matching ErrBadObject.
func JSON(b []byte) ([]byte, error) {
	if len(b) == 0 {
		return b, nil // no object (a tombstone, a metadata-only event)
	}
	if !IsProto(b) {
		if t := bytes.TrimLeft(b, " \t\r\n"); len(t) == 0 || t[0] != '{' {
			n := min(len(b), 8)
			return nil, fmt.Errorf("%w: neither a JSON object nor Kubernetes protobuf (begins %q; a sealed object must be opened first)", ErrBadObject, b[:n])
		}
		return b, nil
	}
	obj, err := decodeProto(b)
	if err != nil {
		return nil, err
	}
	out, err := json.Marshal(obj)
	if err != nil {
		return nil, fmt.Errorf("%w: encode %v as JSON: %w", ErrBadObject, obj.GetObjectKind().GroupVersionKind(), err)
	}
	return out, nil
}

// kindInfo is what the decoders need of a kind of client-go's scheme.
type kindInfo struct {
	typ reflect.Type // the pointer type scheme.Scheme.New returns
	// metaFirst: the type's ObjectMeta is its protobuf field 1, named
	// metadata (true of every built-in kind; checked rather than assumed).
	metaFirst bool
}

// kinds caches kindOf: schema.GroupVersionKind to kindInfo, absent kinds
// as a zero kindInfo.
var kinds sync.Map

var unmarshalerType = reflect.TypeOf((*interface{ Unmarshal([]byte) error })(nil)).Elem()

// kindOf returns gvk's Go type in client-go's scheme; typ is nil when the
// scheme does not know the kind or its type has no protobuf decoder.
func kindOf(gvk schema.GroupVersionKind) kindInfo {
	if v, ok := kinds.Load(gvk); ok {
		return v.(kindInfo)
	}
	var ki kindInfo
	if obj, err := scheme.Scheme.New(gvk); err == nil && reflect.TypeOf(obj).Implements(unmarshalerType) {
		ki.typ = reflect.TypeOf(obj)
		if f, found := ki.typ.Elem().FieldByName("ObjectMeta"); found && f.Type == reflect.TypeOf(metav1.ObjectMeta{}) {
			ki.metaFirst = strings.HasPrefix(f.Tag.Get("protobuf"), "bytes,1,") && strings.HasPrefix(f.Tag.Get("json"), "metadata")
		}
	}
	kinds.Store(gvk, ki)
	return ki
}

// recoverBad turns a panic of generated decoding code into an error
// matching ErrBadObject in *err.
func recoverBad(err *error, gvk *schema.GroupVersionKind) {
	if r := recover(); r != nil {
		*err = fmt.Errorf("%w: protobuf %v: panic: %v", ErrBadObject, *gvk, r)
	}
}

// typedProto is Typed for protobuf.
func typedProto(b []byte, out runtime.Object) error {
	env, err := parseEnvelope(b)
	if err != nil {
		return err
	}
	return typedEnvelope(env, out)
}

// typedEnvelope is typedProto of the parsed envelope env.
func typedEnvelope(env envelope, out runtime.Object) (err error) {
	defer recoverBad(&err, &env.gvk)
	ki := env.ki
	if ki.typ == nil {
		return fmt.Errorf("%w: protobuf %v: not a kind of client-go's scheme", ErrBadObject, env.gvk)
	}
	if m, ok := out.(*metav1.PartialObjectMetadata); ok {
		if !ki.metaFirst {
			return fmt.Errorf("%w: protobuf %v: no metadata at field 1", ErrBadObject, env.gvk)
		}
		// Every occurrence of field 1 merges into the first, as in
		// protobuf; the generated Unmarshal merges into what it is given.
		err := protofields.Each(env.raw, func(num protowire.Number, v []byte) error {
			if num != 1 {
				return nil
			}
			return m.ObjectMeta.Unmarshal(v)
		})
		if err != nil {
			return fmt.Errorf("%w: protobuf %v metadata: %w", ErrBadObject, env.gvk, err)
		}
		m.SetGroupVersionKind(env.gvk)
		return nil
	}
	if reflect.TypeOf(out) != ki.typ {
		return fmt.Errorf("%w: protobuf %v decodes into %v, not %T", ErrBadObject, env.gvk, ki.typ, out)
	}
	if err := out.(interface{ Unmarshal([]byte) error }).Unmarshal(env.raw); err != nil {
		return fmt.Errorf("%w: protobuf %v: %w", ErrBadObject, env.gvk, err)
	}
	out.GetObjectKind().SetGroupVersionKind(env.gvk)
	return nil
}

// decodeProto decodes b (IsProto) into a new object of its kind's Go type,
// kind and apiVersion set.
func decodeProto(b []byte) (runtime.Object, error) {
	env, err := parseEnvelope(b)
	if err != nil {
		return nil, err
	}
	if env.ki.typ == nil {
		return nil, fmt.Errorf("%w: protobuf %v: not a kind of client-go's scheme", ErrBadObject, env.gvk)
	}
	obj := reflect.New(env.ki.typ.Elem()).Interface().(runtime.Object)
	if err := typedEnvelope(env, obj); err != nil {
		return nil, err
	}
	return obj, nil
}

// unstructuredProto is Unstructured for protobuf: through the typed object
// and runtime.DefaultUnstructuredConverter.
func unstructuredProto(b []byte) (_ *unstructured.Unstructured, err error) {
	obj, err := decodeProto(b)
	if err != nil {
		return nil, err
	}
	gvk := obj.GetObjectKind().GroupVersionKind()
	defer recoverBad(&err, &gvk)
	m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
	if err != nil {
		return nil, fmt.Errorf("%w: protobuf %v to unstructured: %w", ErrBadObject, gvk, err)
	}
	return &unstructured.Unstructured{Object: m}, nil
}

// Meta is the part of a stored object's metadata that package journal
// and journal/cache read without decoding the object.
type Meta struct {
	Name            string            `json:"name"`
	Namespace       string            `json:"namespace"`
	UID             string            `json:"uid"`
	ResourceVersion string            `json:"resourceVersion"`
	Labels          map[string]string `json:"labels"`
}

// ReadMeta returns the metadata of a stored object: of JSON through
// encoding/json (the rest of the object is scanned, not decoded), of
// protobuf from the ObjectMeta message only.
func ReadMeta(b []byte) (Meta, error) {
	if IsProto(b) {
		var m metav1.PartialObjectMetadata
		if err := typedProto(b, &m); err != nil {
			return Meta{}, err
		}
		return Meta{Name: m.Name, Namespace: m.Namespace, UID: string(m.UID), ResourceVersion: m.ResourceVersion, Labels: m.Labels}, nil
	}
	var o struct {
		Metadata Meta `json:"metadata"`
	}
	if err := json.Unmarshal(b, &o); err != nil {
		return Meta{}, err
	}
	return o.Metadata, nil
}
