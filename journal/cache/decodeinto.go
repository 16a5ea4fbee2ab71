package cache

// DecodeInto: the typed decode the Reader uses, for callers that hold a
// runtime.Object rather than a type parameter (package jcache decodes into
// the object type controller-runtime hands its informers).

import "k8s.io/apimachinery/pkg/runtime"

// DecodeInto decodes a stored object (JSON as served, with kind and
// apiVersion, or Kubernetes protobuf: journal.Event.Object) into out, a
// pointer to a typed object (e.g. *corev1.ConfigMap or
// *metav1.PartialObjectMetadata) at its zero value, with the rules Get and
// List use (client-go's case-sensitive JSON; protobuf with the generated
// decoder when out's type is the object's kind's, else an error matching
// journal.ErrBadObject). b is only read during the call. The error names
// out's type.
func DecodeInto(b []byte, out runtime.Object) error { return decodeTyped(b, out) }
