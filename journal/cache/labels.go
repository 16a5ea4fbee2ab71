package cache

// LabelSet: a stored object's labels without its decode, for callers that
// select before they decode (package jcache's label-selected reads).

import (
	"fmt"

	"k8s.io/apimachinery/pkg/labels"

	"github.com/watchjournal/watchjournal/journal/internal/storedobj"
)

// LabelSet is the labels of one stored object as a labels.Labels, for a
// labels.Selector's Matches, read by Read without decoding the object:
// of protobuf only the ObjectMeta's labels field is read, of JSON every
// value but metadata.labels is skipped. They equal the labels DecodeInto
// gives. The zero value is empty; each Read replaces the labels and
// reuses the memory of the last. Not safe for concurrent use.
type LabelSet struct {
	ls []storedobj.Label // may alias the bytes of the last Read
}

var _ labels.Labels = (*LabelSet)(nil)

// Read replaces s's labels with those of the stored object b (JSON as
// served, or Kubernetes protobuf: journal.Event.Object). s refers to b
// until the next Read: b must stay unchanged while s is used. An object
// that does not parse is an error matching journal.ErrBadObject, and
// leaves s empty.
func (s *LabelSet) Read(b []byte) error {
	ls, err := storedobj.AppendLabels(s.ls[:0], b)
	if err != nil {
		s.ls = ls[:0]
		return fmt.Errorf("cache: labels: %w", err)
	}
	s.ls = ls
	return nil
}

// Lookup returns the value of label key and whether s has it.
func (s *LabelSet) Lookup(key string) (string, bool) {
	for i := len(s.ls) - 1; i >= 0; i-- { // a later duplicate wins
		if string(s.ls[i].Key) == key {
			return string(s.ls[i].Value), true
		}
	}
	return "", false
}

// Has reports whether s has label key.
func (s *LabelSet) Has(key string) bool {
	_, ok := s.Lookup(key)
	return ok
}

// Get returns the value of label key, "" when s has none.
func (s *LabelSet) Get(key string) string {
	v, _ := s.Lookup(key)
	return v
}

// IsProtobuf reports whether a stored object is in Kubernetes protobuf
// (the built-in kinds a watch or streaming list sent so); otherwise it is
// JSON as served.
func IsProtobuf(b []byte) bool { return storedobj.IsProto(b) }
