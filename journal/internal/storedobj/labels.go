package storedobj

// Labels: a stored object's labels, read without decoding the object.
//
// A List with a label selector keeps few of the objects it walks; reading
// each candidate's labels alone decides which to decode. Of protobuf,
// only the labels of the ObjectMeta message (field 1 of the object,
// labels = 11, each entry a message with key = 1 and value = 2:
// k8s.io/apimachinery/pkg/apis/meta/v1/generated.proto) are read, every
// other field skipped by its length; repeated occurrences merge as in
// protobuf (a later entry's value wins). Of JSON, ReadMeta's answer (the
// rest of the object is scanned, not decoded). The labels are the ones a
// full decode gives, so a selector matches the same objects either way.

import (
	"fmt"

	"google.golang.org/protobuf/encoding/protowire"

	"github.com/watchjournal/watchjournal/internal/protofields"
)

// Protobuf field numbers read by Labels.
const (
	protoObjectMeta = 1  // an object's metadata
	protoLabels     = 11 // ObjectMeta.labels
	protoMapKey     = 1  // a map entry's key
	protoMapValue   = 2  // a map entry's value
)

// Labels returns the labels of a stored object (nil when it has none),
// decoding nothing else of it. The error matches ErrBadObject for a
// protobuf object that does not parse or whose kind has no metadata at
// field 1; a JSON object that does not parse is encoding/json's error.
func Labels(b []byte) (map[string]string, error) {
	if !IsProto(b) {
		m, err := ReadMeta(b)
		return m.Labels, err
	}
	env, err := parseEnvelope(b)
	if err != nil {
		return nil, err
	}
	if env.ki.typ == nil || !env.ki.metaFirst {
		return nil, fmt.Errorf("%w: protobuf %v: no metadata at field 1", ErrBadObject, env.gvk)
	}
	var out map[string]string
	err = protofields.Each(env.raw, func(num protowire.Number, meta []byte) error {
		if num != protoObjectMeta {
			return nil
		}
		return protofields.Each(meta, func(num protowire.Number, entry []byte) error {
			if num != protoLabels {
				return nil
			}
			var k, v string
			err := protofields.Each(entry, func(num protowire.Number, b []byte) error {
				switch num {
				case protoMapKey:
					k = string(b)
				case protoMapValue:
					v = string(b)
				}
				return nil
			})
			if err != nil {
				return err
			}
			if out == nil {
				out = map[string]string{}
			}
			out[k] = v
			return nil
		})
	})
	if err != nil {
		return nil, fmt.Errorf("%w: protobuf %v labels: %w", ErrBadObject, env.gvk, err)
	}
	return out, nil
}
