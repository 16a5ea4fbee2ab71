package jcache

// Transforms before the disk: cache.Options.DefaultTransform and
// ByObject[...].Transform are applied to every object before it is
// stored, so what they remove (managedFields, an annotation holding a
// token) never reaches the journal file, and files shrink by it.
//
// Where. The feed's reconcile.Loop calls transformObject on every object
// it is about to store (reconcile.Options.Transform: watch events, a
// DELETED's last object, list and relist pages, streaming lists). It
// decodes the stored bytes as the informer that set the transform
// decodes them (typed, unstructured or metadata-only, with kind and
// apiVersion), calls the transform, and encodes the result as it came:
// protobuf for a built-in kind's protobuf envelope when the result is a
// typed object, JSON otherwise. A typed object re-encoded keeps only the
// fields this build's types know, as a typed informer sees them anyway.
// The loop refuses a result without the object's name, namespace, UID or
// resourceVersion (reconcile.ErrTransform, retried and reported as the
// loop's error): the journal keys on them.
//
// Several informers, one file. A typed and an unstructured informer of a
// resource share its file (feed.go); controller-runtime gives both the
// same function value (its transform is per GVK). The file is written
// under the transform of the first informer that sets one (SetTransform,
// which controller-runtime calls on every informer it builds, nil
// included); a later informer of the file must set the same function
// value, or SetTransform refuses it with *TransformConflictError: the
// file holds objects without what the first transform dropped, which a
// different transform may need. Function values are compared by identity
// (sameTransform): two closures doing the same thing but made by two
// calls differ, which refuses more than needed, never less.
// Metadata-only informers have files of their own.
//
// Reads apply the transform again. Every object an informer decodes from
// the file (Get, List, an index, a handler's event) goes through its
// transform, as before objects were stored transformed: a transform must
// be idempotent (controller-runtime's TransformStripManagedFields is;
// dropping a field or an annotation is). That is also the rule across
// restarts: objects stored under an older transform stay as they were
// stored until their key changes again (or the file is removed), but no
// read serves them past the current transform, so a transform that drops
// more than the one before is followed at once. A transform that keeps
// more than the one before cannot bring back what was dropped: objects
// stored before keep lacking it until their key changes; to have it at
// once, remove the cache's files before the start (the loop lists into
// new ones).

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"unsafe"

	"k8s.io/apimachinery/pkg/runtime/serializer/protobuf"
	"k8s.io/client-go/kubernetes/scheme"
	toolscache "k8s.io/client-go/tools/cache"
)

// ErrTransformConflict matches a *TransformConflictError.
var ErrTransformConflict = errors.New("jcache: informers of one file set different transforms")

// TransformConflictError is returned by an informer's SetTransform (so by
// GetInformer, Get and List of its object type) when another informer of
// the same journal file (a typed and an unstructured informer of one
// resource and scope) set another transform: the file's objects are
// stored under the first one. It matches ErrTransformConflict.
type TransformConflictError struct {
	// Resource is the file's resource and scope (journal.Resource.String).
	Resource string
	// Path is the journal file.
	Path string
	// First and Second are the object types (%T) of the informer whose
	// transform the file is written under and of the one refused.
	First, Second string
}

func (e *TransformConflictError) Error() string {
	return fmt.Sprintf("jcache: the %s informer of %s sets another transform than the %s informer of the same file (%s), whose transform its objects are stored under: "+
		"give both the same cache.Options.DefaultTransform or ByObject[...].Transform (one function value)", e.Second, e.Resource, e.First, e.Path)
}

// Is reports whether target is ErrTransformConflict.
func (e *TransformConflictError) Is(target error) bool { return target == ErrTransformConflict }

// writeTransform is the transform a feed's objects are stored under.
type writeTransform struct {
	set bool
	inf *informer // decodes the stored objects for fn
	fn  toolscache.TransformFunc
}

// setTransform makes t the transform of f's file when no informer set one
// yet; otherwise t must be the one set (sameTransform).
func (f *feed) setTransform(inf *informer, t toolscache.TransformFunc) error {
	f.tmu.Lock()
	defer f.tmu.Unlock()
	if !f.wt.set {
		f.wt = writeTransform{set: true, inf: inf, fn: t}
		return nil
	}
	if sameTransform(f.wt.fn, t) {
		return nil
	}
	return &TransformConflictError{Resource: f.res.String(), Path: f.path,
		First: fmt.Sprintf("%T", f.wt.inf.objType), Second: fmt.Sprintf("%T", inf.objType)}
}

// sameTransform reports whether a and b are the same function value:
// both nil, or copies of one value (the same closure). Go does not
// compare functions; a func value is a pointer to its closure, which is
// what is compared here (reflect's Pointer gives the code only, the same
// for two closures of one function literal over different variables).
func sameTransform(a, b toolscache.TransformFunc) bool {
	if a == nil || b == nil {
		return a == nil && b == nil
	}
	return *(*unsafe.Pointer)(unsafe.Pointer(&a)) == *(*unsafe.Pointer)(unsafe.Pointer(&b))
}

// protoMagic begins a stored object in Kubernetes protobuf.
var protoMagic = []byte("k8s\x00")

// protoSerializer encodes typed built-in objects as the apiserver does.
var protoSerializer = protobuf.NewSerializer(scheme.Scheme, scheme.Scheme)

// transformObject is the feed's reconcile.Options.Transform: b decoded as
// the file's transform expects it, transformed, and encoded again; b
// itself when no informer set a transform.
func (f *feed) transformObject(b []byte) ([]byte, error) {
	f.tmu.Lock()
	wt := f.wt
	f.tmu.Unlock()
	if wt.fn == nil {
		return b, nil
	}
	obj, err := wt.inf.decodeStored(b, true)
	if err != nil {
		return nil, err
	}
	gvk := obj.GetObjectKind().GroupVersionKind()
	out, err := applyTransform(wt.fn, obj)
	if err != nil {
		return nil, err
	}
	if out.GetObjectKind().GroupVersionKind().Empty() {
		out.GetObjectKind().SetGroupVersionKind(gvk) // stored objects carry their kind
	}
	if _, typed := out.(interface{ Marshal() ([]byte, error) }); typed && bytes.HasPrefix(b, protoMagic) {
		var buf bytes.Buffer
		if err := protoSerializer.Encode(out, &buf); err != nil {
			return nil, fmt.Errorf("jcache: encode the transformed object: %w", err)
		}
		return buf.Bytes(), nil
	}
	enc, err := json.Marshal(out)
	if err != nil {
		return nil, fmt.Errorf("jcache: encode the transformed object: %w", err)
	}
	return enc, nil
}
