package cache

// Labels: a stored object's labels without its decode, for callers that
// select before they decode (package jcache's label-selected reads).

import (
	"fmt"

	"github.com/watchjournal/watchjournal/journal/internal/storedobj"
)

// Labels returns the labels of a stored object (JSON as served, or
// Kubernetes protobuf: journal.Event.Object), nil when it has none,
// decoding nothing else of it: of protobuf only the ObjectMeta's labels
// field is read. They equal the labels DecodeInto gives. b is only read
// during the call. A protobuf object that does not parse is an error
// matching journal.ErrBadObject.
func Labels(b []byte) (map[string]string, error) {
	l, err := storedobj.Labels(b)
	if err != nil {
		return nil, fmt.Errorf("cache: labels: %w", err)
	}
	return l, nil
}
