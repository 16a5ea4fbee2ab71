package cache

// DecodeInto: the typed decode the Reader uses, for callers that hold a
// runtime.Object rather than a type parameter (package jcache decodes into
// the object type controller-runtime hands its informers).

import "k8s.io/apimachinery/pkg/runtime"

// DecodeInto decodes stored JSON (as served, with kind and apiVersion)
// into out, a pointer to a typed object (e.g. *corev1.ConfigMap or
// *metav1.PartialObjectMetadata) at its zero value, with the rules Get and
// List use (client-go's case-sensitive JSON). b is only read during the
// call. The error names out's type.
func DecodeInto(b []byte, out runtime.Object) error { return decodeTyped(b, out) }
