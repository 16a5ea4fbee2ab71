package cache

import (
	"fmt"
	"reflect"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/watchjournal/watchjournal/journal"
	"github.com/watchjournal/watchjournal/journal/internal/storedobj"
)

// DecodeFunc turns an object as stored (JSON as served, with kind and
// apiVersion, or Kubernetes protobuf: journal.Event.Object; valid only
// during the call) into a fresh T. Unstructured and
// Typed make one; a DecodeFunc[runtime.Object] also serves as
// journal/adapt's Options.Decode.
type DecodeFunc[T any] func([]byte) (T, error)

// Unstructured decodes into *unstructured.Unstructured.
func Unstructured(b []byte) (*unstructured.Unstructured, error) {
	return storedobj.Unstructured(b)
}

// Typed returns a DecodeFunc into a new T (a pointer to a struct, e.g.
// *corev1.ConfigMap); scheme gives its kind when the stored JSON has none.
// A protobuf object of another kind than T's is an error matching
// journal.ErrBadObject.
func Typed[T runtime.Object](scheme *runtime.Scheme) DecodeFunc[T] {
	typ := reflect.TypeOf((*T)(nil)).Elem().Elem()
	var gvk schema.GroupVersionKind
	if kinds, _, err := scheme.ObjectKinds(reflect.New(typ).Interface().(runtime.Object)); err == nil && len(kinds) > 0 {
		gvk = kinds[0]
	}
	return func(b []byte) (T, error) {
		out := reflect.New(typ).Interface().(T)
		if err := decodeTyped(b, out); err != nil {
			var zero T
			return zero, err
		}
		if out.GetObjectKind().GroupVersionKind().Empty() {
			out.GetObjectKind().SetGroupVersionKind(gvk)
		}
		return out, nil
	}
}

// decodeTyped is storedobj.Typed with the type in its error.
func decodeTyped(b []byte, out runtime.Object) error {
	if err := storedobj.Typed(b, out); err != nil {
		return fmt.Errorf("cache: decode %T: %w", out, err)
	}
	return nil
}

// Lister lists and gets a journal's objects as T, generic in the object
// type through its DecodeFunc, as client-go's listers do from an
// informer's indexer (List(selector), Namespace(ns).Get(name)), but
// reading the file: each call is one read transaction and returns fresh
// objects (no DeepCopy needed).
type Lister[T any] struct {
	j        *journal.Journal
	decode   DecodeFunc[T]
	resource string
}

// NewLister returns a Lister of j's objects decoded by decode (Typed or
// Unstructured).
//
// Like NewReader it makes j keep objects (journal.KeepObjects).
func NewLister[T any](j *journal.Journal, decode DecodeFunc[T]) *Lister[T] {
	_ = j.Settings().KeepObjects() // when it cannot, every read says why
	l := &Lister[T]{j: j, decode: decode}
	if r, ok, _ := j.Resource(); ok {
		l.resource = r.GVR.Resource
	}
	return l
}

// List returns the objects that match selector (nil: all), in key order.
func (l *Lister[T]) List(selector labels.Selector) ([]T, error) {
	return l.list("", selector)
}

// Get returns a cluster-scoped object by name; NotFound when absent.
func (l *Lister[T]) Get(name string) (T, error) { return l.get("", name) }

// Namespace returns a lister for one namespace.
func (l *Lister[T]) Namespace(namespace string) NamespaceLister[T] {
	return NamespaceLister[T]{l: l, ns: namespace}
}

// NamespaceLister lists and gets the objects of one namespace.
type NamespaceLister[T any] struct {
	l  *Lister[T]
	ns string
}

// List returns the namespace's objects that match selector (nil: all).
func (n NamespaceLister[T]) List(selector labels.Selector) ([]T, error) {
	return n.l.list(n.ns, selector)
}

// Get returns the namespace's object name; NotFound when absent.
func (n NamespaceLister[T]) Get(name string) (T, error) { return n.l.get(n.ns, name) }

func (l *Lister[T]) list(ns string, selector labels.Selector) ([]T, error) {
	var out []T
	_, _, err := scan(l.j, &selection{namespace: ns, labels: selector}, func(_ string, b []byte) error {
		t, err := l.decode(b)
		if err != nil {
			return err
		}
		out = append(out, t)
		return nil
	})
	return out, err
}

func (l *Lister[T]) get(ns, name string) (T, error) {
	var out T
	var found bool
	err := l.j.ViewObjects(func(v *journal.ObjectView) error {
		b, ok, err := v.Get(key(ns, name))
		if err != nil || !ok {
			return err
		}
		found = true
		out, err = l.decode(b)
		return err
	})
	if err == nil && !found {
		err = apierrors.NewNotFound(schema.GroupResource{Resource: l.resource}, name)
	}
	return out, err
}
