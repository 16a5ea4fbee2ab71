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
// Reads do not apply it again: every object in the file was stored under
// the file's transform, which is every one of its informers' (above), so
// a transform need not be idempotent; handlers and reads get the stored
// object decoded, as the transform returned it, encoded.
//
// Across restarts. A file records the transform its objects are stored
// under (the meta entry "jcache.transform": "none", or "transform:" and
// Options.TransformID). When the first informer of a file sets a transform
// that differs from the recorded one (a transform where there was none,
// none where there was one, or another TransformID), the objects stored
// are not what the new transform would store: a transform that drops more
// would serve what it drops, and one that keeps more cannot bring back
// what the older one dropped without the server. So the file is started
// afresh before anything reads it: removed with its relist stage file and
// opened again, empty, and the loop lists every object under the new
// transform (handlers get OnAdd for each, as on any start). The file's
// history, with what the older transform kept, goes with it. The
// function itself cannot be compared across processes: a transform that
// changes what it keeps under the same TransformID is not noticed, so
// change TransformID with it.

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
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
// yet (starting the file afresh when it was written under another:
// afresh); otherwise t must be the one set (sameTransform).
func (f *feed) setTransform(inf *informer, t toolscache.TransformFunc) error {
	f.tmu.Lock()
	defer f.tmu.Unlock()
	if !f.wt.set {
		if err := f.afresh(transformID(t, f.opts)); err != nil {
			return err
		}
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

// transformMeta is the meta entry ("jcache.transform") recording the
// transform a file's objects are stored under.
const transformMeta = "transform"

// transformID is what a file written under t records: "none" for no
// transform, else "transform:" and Options.TransformID.
func transformID(t toolscache.TransformFunc, o *Options) string {
	if t == nil {
		return "none"
	}
	return "transform:" + o.TransformID
}

// afresh records id as the transform of f's file. A file that recorded
// another (no record: "none", as files were written before transforms
// ran before the disk) and holds events is first removed with its relist
// stage file and opened again, empty, with a new loop: only before the
// feed runs and while one informer holds it (SetTransform comes right
// after the informer is built), else it is an error.
func (f *feed) afresh(id string) error {
	m := f.j.Writer().Meta("jcache")
	old, err := m.Get(transformMeta)
	if err != nil {
		return fmt.Errorf("jcache: %s: %w", f.res, err)
	}
	head, err := f.j.Head()
	if err != nil {
		return fmt.Errorf("jcache: %s: %w", f.res, err)
	}
	recorded := string(old)
	if old == nil {
		recorded = "none"
	}
	if recorded != id && head > 0 {
		if err := f.reopenEmpty(); err != nil {
			return err
		}
		f.opts.Logger.Info("the cache file was written under another transform: started afresh, its objects are listed again",
			"file", f.path, "was", recorded, "now", id)
		m = f.j.Writer().Meta("jcache")
	}
	if recorded == id && old != nil {
		return nil
	}
	if err := m.Put(transformMeta, []byte(id)); err != nil {
		return fmt.Errorf("jcache: %s: %w", f.res, err)
	}
	return nil
}

// reopenEmpty closes f's file, removes it and its relist stage file, and
// opens a new one with a new loop.
func (f *feed) reopenEmpty() error {
	registry.mu.Lock()
	defer registry.mu.Unlock()
	if f.running || f.refs != 1 {
		return fmt.Errorf("jcache: %s: the file %s was written under another transform and cannot be started afresh while %d informers hold it (running: %v)", f.res, f.path, f.refs, f.running)
	}
	if err := f.j.Close(); err != nil {
		return fmt.Errorf("jcache: %s: %w", f.res, err)
	}
	for _, p := range []string{f.path, f.path + ".relist"} {
		if err := os.Remove(p); err != nil && !errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("jcache: %s: start the file afresh: %w", f.res, err)
		}
	}
	j, loop, err := f.open()
	if err != nil {
		return err
	}
	f.j = j
	f.setLoop(loop)
	// The handlers' record was the old file's: the new one has seen no
	// handler, so no catch-up (catchup.go).
	f.hmu.Lock()
	f.record, f.hasRecord, f.capped, f.limit, f.committed = 0, false, false, 0, 0
	f.hmu.Unlock()
	return nil
}
