package jcache

// indexer: the journal file as a client-go toolscache.Indexer, read-only.
//
// controller-runtime's CacheReader reads an informer through its indexer:
// GetByKey for Get, List / ByIndex(namespace) / ByIndex(field index) for
// List. Each call here is one read transaction of the journal's objects
// (journal.ObjectView): keys are the journal's index keys, which are
// exactly client-go's MetaNamespaceKeyFunc keys (<namespace>/<name>, or
// <name>). Objects are decoded fresh on every call (stored transformed:
// transform.go), except a Get of an object a handler was just given from
// the same bytes, a deep copy of it (a bounded set: recent.go). A List
// with a label selector or Limit reaches the indexer as a read plan and
// decodes only the objects it returns (readplan.go).
// controller-runtime's reader is
// told not to deep-copy them (newCache): each is already the caller's own.
//
// Indexes (IndexField) are kept in the file, written in the same
// transaction as the object (diskindex.go): ByIndex and IndexKeys are a
// lookup of the value's keys and a read of their objects. An index the
// file does not keep (its registration failed) or does not answer for yet
// (its reindex against the function is not done) is evaluated at
// read time:
// ByIndex decodes every object of the namespace the index value names
// (all, for an all-namespaces value) and keeps those whose index function
// gives the value. Index(name, obj) is a lookup per value of obj's;
// ListIndexFuncValues a walk of the index's values. Namespace lookups
// (toolscache.NamespaceIndex) are key-prefix scans.
//
// Each read also sees the watch's batch in flight, staged but not yet
// committed (tail.go): per key, its latest state (an object, or deleted)
// over the file's.
//
// Store's writes fail: the file is written only by its reconcile.Loop.
// Store.List and ListKeys cannot return an error: one is logged, and the
// objects read before it are returned.

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/sets"
	toolscache "k8s.io/client-go/tools/cache"

	"github.com/watchjournal/watchjournal/journal"
	jc "github.com/watchjournal/watchjournal/journal/cache"
)

// errReadOnly is every Store write's error.
var errReadOnly = errors.New("jcache: the informer's store is its journal file, written only by its reconcile loop")

// allNamespacesPrefix is controller-runtime's index key prefix for
// "all namespaces" (internal.KeyToNamespacedKey).
const allNamespacesPrefix = "__all_namespaces/"

type indexer struct{ inf *informer }

var _ toolscache.Indexer = (*indexer)(nil)

func (x *indexer) Add(any) error               { return errReadOnly }
func (x *indexer) Update(any) error            { return errReadOnly }
func (x *indexer) Delete(any) error            { return errReadOnly }
func (x *indexer) Replace([]any, string) error { return errReadOnly }
func (x *indexer) Resync() error               { return nil }
func (x *indexer) Bookmark(string)             {}
func (x *indexer) LastStoreSyncResourceVersion() string {
	if x.inf.f == nil {
		return ""
	}
	rv, _ := x.inf.f.j.ResourceVersion()
	return rv
}

// scan calls fn with each object whose key starts with prefix, decoded,
// in key order, in one read transaction; fn runs on the caller's
// goroutine, one call at a time.
func (x *indexer) scan(prefix string, fn func(key string, obj runtime.Object) error) error {
	return x.scanPlanned(prefix, nil, fn)
}

// scanPlanned is scan of the objects p selects (readplan.go), up to its
// limit: the others are not decoded. A nil p selects every object.
func (x *indexer) scanPlanned(prefix string, p *readPlan, fn func(key string, obj runtime.Object) error) error {
	if x.inf.f == nil {
		return x.inf.err
	}
	pending := x.inf.f.tail.overlay(prefix)
	return x.inf.f.j.ViewObjects(func(v *journal.ObjectView) error {
		d := readDecoder{inf: x.inf, fn: fn} // decoded on all cores (readdecode.go)
		var n int64
		var ls jc.LabelSet
		add := func(k string, b []byte) error {
			x.inf.f.readObject(len(b))
			if ok, err := p.selects(b, &ls); err != nil || !ok {
				if err != nil {
					return fmt.Errorf("jcache: %s: %w", k, err)
				}
				return nil
			}
			if err := d.add(k, b); err != nil {
				return err
			}
			if n++; p != nil && p.limit > 0 && n >= p.limit {
				return errPlanDone
			}
			return nil
		}
		m := &merge{o: pending.above(v.Head()), emit: add}
		err := v.Scan(prefix, func(k string, b []byte) (bool, error) {
			if b == nil {
				return false, &journal.NoObjectError{Key: k}
			}
			b, ok, err := m.file(k, b)
			if err != nil || !ok {
				return err == nil, err
			}
			return true, add(k, b)
		})
		if err == nil {
			err = m.rest()
		}
		// The objects before an error are handed over first.
		ferr := d.flush()
		if errors.Is(err, errPlanDone) {
			err = nil
		}
		if err == nil {
			err = ferr
		}
		return err
	})
}

func (x *indexer) List() []any {
	var out []any
	if err := x.scan("", func(_ string, o runtime.Object) error { out = append(out, o); return nil }); err != nil {
		x.inf.log.Error(err, "list from the journal file")
	}
	return out
}

func (x *indexer) ListKeys() []string {
	var out []string
	if x.inf.f == nil {
		return nil
	}
	pending := x.inf.f.tail.overlay("")
	err := x.inf.f.j.ViewObjects(func(v *journal.ObjectView) error {
		m := &merge{o: pending.above(v.Head()), emit: func(k string, _ []byte) error { out = append(out, k); return nil }}
		err := v.Scan("", func(k string, b []byte) (bool, error) {
			if _, ok, err := m.file(k, b); err != nil || !ok {
				return err == nil, err
			}
			out = append(out, k)
			return true, nil
		})
		if err != nil {
			return err
		}
		return m.rest()
	})
	if err != nil {
		x.inf.log.Error(err, "list keys from the journal file")
	}
	return out
}

func (x *indexer) Get(obj any) (any, bool, error) {
	k, err := toolscache.MetaNamespaceKeyFunc(obj)
	if err != nil {
		return nil, false, err
	}
	return x.GetByKey(k)
}

func (x *indexer) GetByKey(key string) (any, bool, error) {
	if x.inf.f == nil {
		return nil, false, x.inf.err
	}
	var out runtime.Object
	pending, inTail := x.inf.f.tail.entry(key)
	err := x.inf.f.j.ViewObjects(func(v *journal.ObjectView) error {
		var b []byte
		var ok bool
		var err error
		if inTail && pending.offset > v.Head() {
			b, ok = pending.obj, !pending.deleted
		} else {
			b, ok, err = v.Get(key)
		}
		if err != nil || !ok {
			return err
		}
		x.inf.f.readObject(len(b))
		if out = x.inf.recent.get(key, b, x.inf.readTypeMeta); out != nil {
			return nil // given to a handler from these bytes (recent.go)
		}
		out, err = x.inf.decodeRead(b)
		return err
	})
	if err != nil || out == nil {
		return nil, false, err
	}
	return out, true, nil
}

// Index returns the objects that share an index value with obj.
func (x *indexer) Index(name string, obj any) ([]any, error) {
	fn, ok := x.inf.indexFunc(name)
	if !ok {
		return nil, errNoIndex(name)
	}
	vals, err := fn(obj)
	if err != nil {
		return nil, err
	}
	if _, onDisk := x.inf.disk.get(name); onDisk {
		seen := map[string]bool{}
		var out []any
		for _, v := range vals {
			err := x.byIndex(name, v, func(k string, o runtime.Object) {
				if !seen[k] {
					seen[k] = true
					out = append(out, o)
				}
			})
			if err != nil {
				return nil, err
			}
		}
		return out, nil
	}
	want := sets.New(vals...)
	var out []any
	err = x.scan("", func(_ string, o runtime.Object) error {
		got, err := fn(o)
		if err != nil {
			return err
		}
		if slices.ContainsFunc(got, func(g string) bool { return want.Has(g) }) {
			out = append(out, o)
		}
		return nil
	})
	return out, err
}

// errNoIndex is the error of a lookup in an index that was never added:
// client-go's indexer's text, word for word (thread_safe_store.go), which
// controller-runtime's reader returns unchanged for a List whose
// MatchingFields names no index, and which callers match.
func errNoIndex(name string) error {
	return fmt.Errorf("Index with name %s does not exist", name) //nolint:staticcheck // ST1005: client-go's text
}

// byIndex calls fn with each object whose index name includes value.
func (x *indexer) byIndex(name, value string, fn func(key string, o runtime.Object)) error {
	if name == planIndex {
		p, prefix, err := x.planned(value)
		if err != nil {
			return err
		}
		return x.scanPlanned(prefix, p, func(k string, o runtime.Object) error { fn(k, o); return nil })
	}
	if name == toolscache.NamespaceIndex {
		return x.scan(value+"/", func(k string, o runtime.Object) error { fn(k, o); return nil })
	}
	idx, ok := x.inf.indexFunc(name)
	if !ok {
		return errNoIndex(name)
	}
	if done, err := x.lookup(name, value, fn); done {
		return err
	}
	indexReads.scan.Add(1)
	prefix := ""
	if ns, _, found := strings.Cut(value, "/"); found && value != "" && !strings.HasPrefix(value, allNamespacesPrefix) {
		prefix = ns + "/"
	}
	return x.scan(prefix, func(k string, o runtime.Object) error {
		got, err := idx(o)
		if err != nil {
			return err
		}
		if slices.Contains(got, value) {
			fn(k, o)
		}
		return nil
	})
}

func (x *indexer) ByIndex(name, value string) ([]any, error) {
	var out []any
	err := x.byIndex(name, value, func(_ string, o runtime.Object) { out = append(out, o) })
	return out, err
}

func (x *indexer) IndexKeys(name, value string) ([]string, error) {
	var out []string
	err := x.byIndex(name, value, func(k string, _ runtime.Object) { out = append(out, k) })
	return out, err
}

func (x *indexer) ListIndexFuncValues(name string) []string {
	idx, ok := x.inf.indexFunc(name)
	if !ok {
		return nil
	}
	// With a batch in flight, the values are evaluated over the objects,
	// the tail's among them (tail.go).
	if dn, onDisk := x.inf.disk.get(name); onDisk && x.inf.f != nil && x.inf.f.tail.overlay("") == nil {
		vals, err := x.inf.f.j.Indexes().Values(dn)
		if err == nil {
			return vals
		}
		if !errors.Is(err, journal.ErrNoIndex) {
			x.inf.log.Error(err, "index values from the journal file", "index", name)
			return nil
		}
	}
	seen := map[string]bool{}
	var out []string
	err := x.scan("", func(_ string, o runtime.Object) error {
		got, err := idx(o)
		for _, g := range got {
			if !seen[g] {
				seen[g] = true
				out = append(out, g)
			}
		}
		return err
	})
	if err != nil {
		x.inf.log.Error(err, "index values from the journal file", "index", name)
	}
	return out
}

func (x *indexer) GetIndexers() toolscache.Indexers {
	x.inf.mu.Lock()
	defer x.inf.mu.Unlock()
	return maps.Clone(x.inf.indexers)
}

func (x *indexer) AddIndexers(add toolscache.Indexers) error { return x.inf.AddIndexers(add) }
