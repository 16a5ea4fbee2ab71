// Package storedobj decodes the objects a journal stores into Go objects,
// for journal/cache, journal/adapt and package journal itself: typed
// (Typed), unstructured (Unstructured), or back to the JSON the apiserver
// would have served (JSON). It is the one place stored objects are
// decoded.
//
// A stored object is in one of two encodings, and its first bytes say
// which (IsProto):
//
//   - JSON as the apiserver served it, with kind and apiVersion ('{'
//     first): custom resources, aggregated APIs, metadata-only journals,
//     paginated lists, lookups and verifies, reconcile.WireJSON, and every
//     file written before schema 4.
//   - Kubernetes protobuf as the apiserver sent it on a watch or a
//     streaming list ("k8s\x00", then a runtime.Unknown holding apiVersion,
//     kind and the object's message): the built-in kinds of client-go's
//     scheme (k8s.io/client-go/kubernetes/scheme). proto.go decodes it.
//
// JSON follows the apiserver's rules (what sigs.k8s.io/json implements
// for client-go): field names match case-sensitively, unknown fields are
// ignored, a duplicate name's last value wins, invalid UTF-8 becomes
// U+FFFD, and numbers decoded into an interface{} stay int64 when
// integral. Two paths follow them:
//
//   - Kubernetes' built-in API types (packages under k8s.io/api/, and
//     k8s.io/apimachinery/pkg/apis/meta/v1 for PartialObjectMetadata)
//     decode with encoding/json/v2 (github.com/go-json-experiment/json, the
//     module that mirrors the standard library's package, stable in Go
//     1.27), whose defaults already match names case-sensitively, set to
//     allow duplicate names and invalid UTF-8 as above. It decodes in one
//     pass, where encoding/json (and sigs.k8s.io/json, its fork) first
//     scans the whole value to validate it and then decodes it: faster,
//     with fewer allocations. The API
//     conventions keep interface{} and time.Duration, where the two
//     packages differ, out of these types (they use RawExtension, JSON and
//     metav1.Duration, whose own UnmarshalJSON both call); json_test.go
//     checks the two paths agree on recorded apiserver objects and on
//     case, duplicates and encoding.
//   - Every other type (custom resources' Go types may hold interface{}
//     or time.Duration) decodes with sigs.k8s.io/json, as client-go does.

package storedobj

import (
	"reflect"
	"strings"
	"sync"
	"time"

	jsonv2 "github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	sjson "sigs.k8s.io/json"
)

// v2Options are encoding/json/v2's options for built-in API types: its
// defaults (case-sensitive names, unknown members ignored) with v1's
// tolerance of duplicate names and invalid UTF-8, and metav1.Time read
// as its UnmarshalJSON reads it (RFC 3339, local time; anything but a
// string goes to UnmarshalJSON itself), without the second JSON decoder
// UnmarshalJSON starts for the string (a tenth of a Get's time).
var v2Options = jsonv2.JoinOptions(jsontext.AllowDuplicateNames(true), jsontext.AllowInvalidUTF8(true),
	jsonv2.WithUnmarshalers(jsonv2.UnmarshalFromFunc(unmarshalTime)))

func unmarshalTime(dec *jsontext.Decoder, t *metav1.Time) error {
	if dec.PeekKind() != '"' {
		v, err := dec.ReadValue()
		if err != nil {
			return err
		}
		return t.UnmarshalJSON(v)
	}
	tok, err := dec.ReadToken()
	if err != nil {
		return err
	}
	pt, err := time.Parse(time.RFC3339, tok.String())
	if err != nil {
		return err
	}
	t.Time = pt.Local()
	return nil
}

// builtin caches, by struct type, whether the type is a built-in API type.
var builtin sync.Map // reflect.Type → bool

// isBuiltin reports whether t (a struct type) is one of Kubernetes'
// built-in API types.
func isBuiltin(t reflect.Type) bool {
	if v, ok := builtin.Load(t); ok {
		return v.(bool)
	}
	p := t.PkgPath()
	ok := strings.HasPrefix(p, "k8s.io/api/") || p == "k8s.io/apimachinery/pkg/apis/meta/v1"
	builtin.Store(t, ok)
	return ok
}

// Typed decodes a stored object into out, a pointer to a typed object that
// holds its zero value. The stored object's kind is the journal's
// (checked by the caller), so JSON skips the serializer's first pass that
// reads kind and apiVersion: one JSON pass per object. Protobuf decodes as
// typedProto says; an error there matches ErrBadObject.
func Typed(b []byte, out runtime.Object) error {
	if IsProto(b) {
		return typedProto(b, out)
	}
	if isBuiltin(reflect.TypeOf(out).Elem()) {
		return jsonv2.Unmarshal(b, out, v2Options)
	}
	return sjson.UnmarshalCaseSensitivePreserveInts(b, out)
}

// Unstructured decodes a stored object into a new
// *unstructured.Unstructured. Protobuf goes through its Go type
// (unstructuredProto: correct, but slower than from JSON).
func Unstructured(b []byte) (*unstructured.Unstructured, error) {
	if IsProto(b) {
		return unstructuredProto(b)
	}
	u := &unstructured.Unstructured{}
	if err := u.UnmarshalJSON(b); err != nil {
		return nil, err
	}
	return u, nil
}
