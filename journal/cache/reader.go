package cache

import (
	"context"
	"fmt"
	"reflect"
	"strings"
	"sync"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"

	"github.com/watchjournal/watchjournal/journal"
)

// Reader is a client.Reader for the one resource a journal records. It is
// safe for concurrent use.
type Reader struct {
	j      *journal.Journal
	scheme *runtime.Scheme

	mu  sync.Mutex
	gvk schema.GroupVersionKind // the file's kind (journal.TypeMeta), once known
	gr  schema.GroupResource
}

var _ client.Reader = (*Reader)(nil)

// NewReader returns a Reader of j's objects, and makes j keep them
// (journal.KeepObjects: create it before retention first trims the
// journal for a complete cache). scheme gives the kind of typed objects (a nil scheme
// allows only unstructured ones). On a read-only j whose file does not
// keep objects, reads fail with journal.ErrObjectsNotKept.
func NewReader(j *journal.Journal, scheme *runtime.Scheme) *Reader {
	_ = j.Settings().KeepObjects() // when it cannot, every read says why
	if scheme == nil {
		scheme = runtime.NewScheme()
	}
	return &Reader{j: j, scheme: scheme}
}

// kind reads the file's kind and resource, once it is known: an error
// (the file records no kind before its first list) is not kept, so a
// later call tries again.
func (r *Reader) kind() (schema.GroupVersionKind, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if !r.gvk.Empty() {
		return r.gvk, nil
	}
	kind, apiVersion, err := r.j.TypeMeta()
	if err != nil {
		return r.gvk, fmt.Errorf("cache: the journal's kind: %w", err)
	}
	gv, err := schema.ParseGroupVersion(apiVersion)
	if err != nil {
		return r.gvk, fmt.Errorf("cache: the journal's apiVersion %q: %w", apiVersion, err)
	}
	res, _, err := r.j.Resource()
	if err != nil {
		return r.gvk, err
	}
	r.gr = res.GVR.GroupResource()
	r.gvk = gv.WithKind(kind)
	return r.gvk, nil
}

// checkKind returns an error unless obj's kind (the scheme's, or an
// unstructured object's own when set) is the journal's, or kind+"List" for
// a list.
func (r *Reader) checkKind(obj runtime.Object, list bool) (schema.GroupVersionKind, error) {
	want, err := r.kind()
	if err != nil {
		return want, err
	}
	var got schema.GroupVersionKind
	switch obj.(type) {
	case runtime.Unstructured:
		got = obj.GetObjectKind().GroupVersionKind()
		if got.Empty() {
			return want, nil
		}
	default:
		got, err = apiutil.GVKForObject(obj, r.scheme)
		if err != nil {
			return want, fmt.Errorf("cache: %w", err)
		}
	}
	if list {
		got.Kind = strings.TrimSuffix(got.Kind, "List")
	}
	if got.GroupKind() != want.GroupKind() {
		return want, fmt.Errorf("cache: this reader serves %s from %s, not %s", want.Kind, r.j.Path(), got.Kind)
	}
	return want, nil
}

// decode decodes a stored object into a fresh object of obj's type.
func (r *Reader) decode(b []byte, gvk schema.GroupVersionKind, like runtime.Object) (runtime.Object, error) {
	if _, ok := like.(runtime.Unstructured); ok {
		u, err := Unstructured(b)
		if err != nil {
			return nil, err
		}
		if u.GetKind() == "" {
			u.SetGroupVersionKind(gvk)
		}
		return u, nil
	}
	out := reflect.New(reflect.TypeOf(like).Elem()).Interface().(runtime.Object)
	return out, decodeTyped(b, out)
}

// Get implements client.Reader: key's object decoded into obj, a NotFound
// error when the journal has no such key. Options are ignored.
func (r *Reader) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	return r.get(ctx, key, obj, nil)
}

// GetAt is Get that also returns the journal offset the read is current
// with (the head of its read transaction).
func (r *Reader) GetAt(ctx context.Context, k client.ObjectKey, obj client.Object) (uint64, error) {
	var head uint64
	err := r.get(ctx, k, obj, &head)
	return head, err
}

// get is GetAt; the head is read (one more lookup in the transaction) only
// when head is not nil. The object is decoded inside the read
// transaction, from the memory-mapped bytes ObjectView.Get returns, with
// no copy first: the decoders copy what they keep (the protobuf types'
// generated Unmarshal copies every string and []byte field out of its
// input, and so do the JSON decoders), so obj shares no memory with the
// file once the transaction ends.
func (r *Reader) get(ctx context.Context, k client.ObjectKey, obj client.Object, head *uint64) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	gvk, err := r.checkKind(obj, false)
	if err != nil {
		return err
	}
	var found bool
	u, isU := obj.(*unstructured.Unstructured)
	err = r.j.ViewObjects(func(v *journal.ObjectView) error {
		if head != nil {
			*head = v.Head()
		}
		b, ok, err := v.Get(key(k.Namespace, k.Name))
		if err != nil || !ok {
			return err
		}
		found = true
		if isU {
			o, err := r.decode(b, gvk, obj)
			if err == nil {
				u.Object = o.(*unstructured.Unstructured).Object
			}
			return err
		}
		// Straight into obj, from its zero value: no second copy.
		zero(obj)
		if err := decodeTyped(b, obj); err != nil {
			zero(obj)
			return err
		}
		return nil
	})
	if err != nil {
		return err
	}
	if !found {
		return apierrors.NewNotFound(r.gr, k.Name)
	}
	return nil
}

// zero sets the object obj points at to its zero value.
func zero(obj runtime.Object) { reflect.ValueOf(obj).Elem().SetZero() }

// List implements client.Reader: the objects in the namespace
// (client.InNamespace; all when empty) that match the label selector and
// the field selector (metadata.name and metadata.namespace only, else
// ErrUnsupportedField), in key order, into list (a typed list or an
// *unstructured.UnstructuredList). Limit and Continue page through the
// keys: Continue is the last key of the previous page, each page its own
// read.
func (r *Reader) List(ctx context.Context, list client.ObjectList, opts ...client.ListOption) error {
	_, err := r.ListAt(ctx, list, opts...)
	return err
}

// ListAt is List that also returns the journal offset the read is current
// with (the head of its read transaction).
func (r *Reader) ListAt(ctx context.Context, list client.ObjectList, opts ...client.ListOption) (uint64, error) {
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	lo := (&client.ListOptions{}).ApplyOptions(opts)
	gvk, err := r.checkKind(list, true)
	if err != nil {
		return 0, err
	}
	s := &selection{namespace: lo.Namespace, labels: lo.LabelSelector, fields: lo.FieldSelector, limit: lo.Limit, after: lo.Continue}
	var like runtime.Object
	if _, ok := list.(*unstructured.UnstructuredList); ok {
		like = &unstructured.Unstructured{}
	} else if like, err = r.scheme.New(gvk); err != nil {
		return 0, fmt.Errorf("cache: %w", err)
	} else if items, ok := typedItems(list); ok {
		return r.listTyped(list, items, s)
	}
	var items []runtime.Object
	head, more, err := scan(r.j, s, func(_ string, b []byte) error {
		o, err := r.decode(b, gvk, like)
		if err != nil {
			return err
		}
		items = append(items, o)
		return nil
	})
	if err != nil {
		return head, err
	}
	if err := meta.SetList(list, items); err != nil {
		return head, fmt.Errorf("cache: %w", err)
	}
	list.SetContinue(more)
	if u, ok := list.(*unstructured.UnstructuredList); ok && u.GetKind() == "" {
		u.SetGroupVersionKind(gvk.GroupVersion().WithKind(gvk.Kind + "List"))
	}
	return head, nil
}

// typedItems returns list's Items slice when its elements are typed
// objects held by value (corev1.ConfigMapList's []ConfigMap), which
// listTyped decodes in place.
func typedItems(list client.ObjectList) (reflect.Value, bool) {
	p, err := meta.GetItemsPtr(list)
	if err != nil {
		return reflect.Value{}, false
	}
	items := reflect.ValueOf(p).Elem()
	if items.Kind() != reflect.Slice || items.Type().Elem().Kind() != reflect.Struct ||
		!reflect.PointerTo(items.Type().Elem()).Implements(reflect.TypeFor[runtime.Object]()) {
		return reflect.Value{}, false
	}
	return items, true
}

// listTyped is ListAt for a typed list: each selected object is decoded
// straight into the next element of items (no object allocated per item,
// no copy into the list afterwards). The slice grows in place (Grow and
// SetLen on an addressable slice: reflect.Append allocates a new slice
// header per call).
func (r *Reader) listTyped(list client.ObjectList, items reflect.Value, s *selection) (uint64, error) {
	out := reflect.New(items.Type()).Elem()
	out.Set(reflect.MakeSlice(items.Type(), 0, 16))
	head, more, err := scan(r.j, s, func(_ string, b []byte) error {
		n := out.Len()
		out.Grow(1)
		out.SetLen(n + 1)
		item := out.Index(n)
		item.SetZero()
		return decodeTyped(b, item.Addr().Interface().(runtime.Object))
	})
	if err != nil {
		return head, err
	}
	items.Set(out)
	list.SetContinue(more)
	return head, nil
}

// Missing returns the live keys in namespace ("" all) that the file holds
// no object for, in key order: keys unchanged since objects were switched
// on over an existing index (journal.ObjectView.Missing). Get and List of
// them fail with journal.ErrNoObject until they change.
func (r *Reader) Missing(ctx context.Context, namespace string) ([]string, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	var out []string
	err := r.j.ViewObjects(func(v *journal.ObjectView) error {
		return v.Missing((&selection{namespace: namespace}).prefix(), func(k string) (bool, error) {
			out = append(out, k)
			return true, nil
		})
	})
	return out, err
}
