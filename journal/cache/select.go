package cache

// Selection: which stored objects a List returns. Namespaces are key
// prefixes ("<namespace>/"); label and field selectors are matched against
// the object's metadata, parsed from the stored object for each candidate
// and dropped after the match (nothing kept). Field selectors support
// metadata.name and metadata.namespace, as controller-runtime's cache does
// without an index; any other field is ErrUnsupportedField.

import (
	"errors"
	"fmt"

	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/watchjournal/watchjournal/journal"
	"github.com/watchjournal/watchjournal/journal/internal/storedobj"
)

// ErrUnsupportedField: a field selector names a field other than
// metadata.name or metadata.namespace.
var ErrUnsupportedField = errors.New("cache: field selector supports only metadata.name and metadata.namespace")

// selection is a parsed List request.
type selection struct {
	namespace string
	labels    labels.Selector // nil: everything
	fields    fields.Selector // nil: everything
	limit     int64
	after     string // continue: keys strictly after this one
}

func (s *selection) check() error {
	if s.fields == nil {
		return nil
	}
	for _, r := range s.fields.Requirements() {
		if r.Field != "metadata.name" && r.Field != "metadata.namespace" {
			return fmt.Errorf("%w: %q", ErrUnsupportedField, r.Field)
		}
	}
	return nil
}

func (s *selection) prefix() string {
	if s.namespace == "" {
		return ""
	}
	return s.namespace + "/"
}

func (s *selection) matches(obj []byte) (bool, error) {
	if (s.labels == nil || s.labels.Empty()) && (s.fields == nil || s.fields.Empty()) {
		return true, nil
	}
	m, err := storedobj.ReadMeta(obj)
	if err != nil {
		return false, err
	}
	if s.labels != nil && !s.labels.Matches(labels.Set(m.Labels)) {
		return false, nil
	}
	if s.fields != nil && !s.fields.Matches(fields.Set{"metadata.name": m.Name, "metadata.namespace": m.Namespace}) {
		return false, nil
	}
	return true, nil
}

// scan calls fn with each selected object in key order, in one read
// transaction, and returns the offset that read is current with and the
// last key given to fn when the limit cut the scan ("" otherwise). A live
// key in the range without a stored object is a *journal.NoObjectError.
func scan(j *journal.Journal, s *selection, fn func(key string, obj []byte) error) (head uint64, more string, err error) {
	if err := s.check(); err != nil {
		return 0, "", err
	}
	err = j.ViewObjects(func(v *journal.ObjectView) error {
		head = v.Head()
		var n int64
		return v.Scan(s.prefix(), func(k string, obj []byte) (bool, error) {
			if s.after != "" && k <= s.after {
				return true, nil
			}
			if obj == nil {
				return false, &journal.NoObjectError{Key: k}
			}
			ok, err := s.matches(obj)
			if err != nil {
				return false, fmt.Errorf("cache: %s: %w", k, err)
			}
			if !ok {
				return true, nil
			}
			if s.limit > 0 && n == s.limit {
				return false, nil
			}
			if err := fn(k, obj); err != nil {
				return false, err
			}
			n++
			if s.limit > 0 && n == s.limit {
				more = k
			}
			return true, nil
		})
	})
	return head, more, err
}

// key is the index key of namespace/name.
func key(namespace, name string) string {
	if namespace == "" {
		return name
	}
	return namespace + "/" + name
}
