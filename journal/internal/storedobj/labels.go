package storedobj

// Labels: a stored object's labels, read without decoding the object.
//
// A List with a label selector keeps few of the objects it walks; reading
// each candidate's labels alone decides which to decode. Of protobuf,
// only the labels of the ObjectMeta message (field 1 of the object,
// labels = 11, each entry a message with key = 1 and value = 2:
// k8s.io/apimachinery/pkg/apis/meta/v1/generated.proto) are read, every
// other field skipped by its length; repeated occurrences merge as in
// protobuf (a later entry's value wins). Of JSON, the object's tokens are
// walked with encoding/json/v2's jsontext (the options of the typed path:
// duplicate names and invalid UTF-8 allowed), every value but
// metadata.labels skipped unread, and the walk ends with the first
// metadata member: the apiserver writes each name once (an object that
// repeats metadata, which no apiserver serves, is read from its first).
// The labels are the ones a full decode gives, so a selector matches the
// same objects either way.

import (
	"bytes"
	"errors"
	"fmt"
	"sync"
	"unicode/utf8"

	"github.com/go-json-experiment/json/jsontext"

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
		return jsonLabels(b)
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

// labelsDecoder is a jsontext decoder and its reader, reused by
// jsonLabels (a decoder holds a few kilobytes of buffers).
type labelsDecoder struct {
	r   bytes.Reader
	dec jsontext.Decoder
}

var decoders = sync.Pool{New: func() any { return new(labelsDecoder) }}

// errDone ends a walk once the labels are read.
var errDone = errors.New("done")

// jsonLabels is Labels of a JSON object.
func jsonLabels(b []byte) (map[string]string, error) {
	var out map[string]string
	ld := decoders.Get().(*labelsDecoder)
	ld.r.Reset(b)
	dec := &ld.dec
	dec.Reset(&ld.r, jsontext.AllowDuplicateNames(true), jsontext.AllowInvalidUTF8(true))
	defer func() {
		ld.r.Reset(nil) // b is the caller's: keep no reference
		decoders.Put(ld)
	}()
	err := eachMember(dec, func(name []byte) (bool, error) {
		if !isName(name, "metadata") {
			return false, nil
		}
		err := eachMember(dec, func(name []byte) (bool, error) {
			if !isName(name, "labels") {
				return false, nil
			}
			return true, eachMember(dec, func(key []byte) (bool, error) {
				k, err := unquote(key)
				if err != nil {
					return true, err
				}
				v, err := dec.ReadValue()
				if err != nil {
					return true, err
				}
				if v.Kind() != '"' {
					return true, fmt.Errorf("label %q: %v, not a string", k, v.Kind())
				}
				vs, err := unquote(v)
				if err != nil {
					return true, err
				}
				if out == nil {
					out = map[string]string{}
				}
				out[k] = vs
				return true, nil
			})
		})
		if err == nil {
			err = errDone
		}
		return true, err
	})
	if err != nil && !errors.Is(err, errDone) {
		return nil, fmt.Errorf("%w: JSON labels: %w", ErrBadObject, err)
	}
	return out, nil
}

// unquote returns the JSON string q unquoted, invalid UTF-8 replaced as
// the decoders replace it.
func unquote(q []byte) (string, error) {
	if inner := q[1 : len(q)-1]; !bytes.ContainsRune(inner, '\\') && utf8.Valid(inner) {
		return string(inner), nil
	}
	if !utf8.Valid(q) {
		// Each byte that begins no valid sequence becomes U+FFFD.
		var valid []byte
		for len(q) > 0 {
			r, n := utf8.DecodeRune(q)
			valid = utf8.AppendRune(valid, r)
			q = q[n:]
		}
		q = valid
	}
	u, err := jsontext.AppendUnquote(nil, q)
	return string(u), err
}

// isName reports whether the quoted JSON string q is name.
func isName(q []byte, name string) bool {
	if len(q) == len(name)+2 && string(q[1:len(q)-1]) == name {
		return true
	}
	if !bytes.ContainsRune(q, '\\') {
		return false
	}
	u, err := jsontext.AppendUnquote(nil, q)
	return err == nil && string(u) == name
}

// eachMember reads the JSON object (or null) next in dec and calls fn
// with each member's name, quoted as in the input, positioned before its
// value; fn returns true when it read the value, else the value is
// skipped.
func eachMember(dec *jsontext.Decoder, fn func(name []byte) (bool, error)) error {
	tok, err := dec.ReadToken()
	if err != nil {
		return err
	}
	switch tok.Kind() {
	case 'n':
		return nil
	case '{':
	default:
		return fmt.Errorf("%v, not an object", tok.Kind())
	}
	for dec.PeekKind() != '}' {
		name, err := dec.ReadValue()
		if err != nil {
			return err
		}
		read, err := fn(name)
		if err != nil {
			return err
		}
		if !read {
			if err := dec.SkipValue(); err != nil {
				return err
			}
		}
	}
	_, err = dec.ReadToken()
	return err
}
