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

// Label is one label of a stored object. Key and Value alias the stored
// bytes where they need no unquoting (valid only while those are).
type Label struct{ Key, Value []byte }

// Labels returns the labels of a stored object (nil when it has none),
// decoding nothing else of it. The error matches ErrBadObject for an
// object that does not parse, or a protobuf object whose kind has no
// metadata at field 1.
func Labels(b []byte) (map[string]string, error) {
	ls, err := AppendLabels(nil, b)
	if err != nil || len(ls) == 0 {
		return nil, err
	}
	out := make(map[string]string, len(ls))
	for _, l := range ls {
		out[string(l.Key)] = string(l.Value)
	}
	return out, nil
}

// AppendLabels appends the labels of a stored object to dst, in the
// order stored (a later duplicate key wins, as in a decoded map), and
// returns it: Labels without building a map, and without copying a key
// or value that needs no unquoting. Errors are Labels'.
func AppendLabels(dst []Label, b []byte) ([]Label, error) {
	if !IsProto(b) {
		return jsonLabels(dst, b)
	}
	env, err := parseEnvelope(b)
	if err != nil {
		return dst, err
	}
	if env.ki.typ == nil || !env.ki.metaFirst {
		return dst, fmt.Errorf("%w: protobuf %v: no metadata at field 1", ErrBadObject, env.gvk)
	}
	err = protofields.Each(env.raw, func(num protowire.Number, meta []byte) error {
		if num != protoObjectMeta {
			return nil
		}
		return protofields.Each(meta, func(num protowire.Number, entry []byte) error {
			if num != protoLabels {
				return nil
			}
			var l Label
			err := protofields.Each(entry, func(num protowire.Number, b []byte) error {
				switch num {
				case protoMapKey:
					l.Key = b
				case protoMapValue:
					l.Value = b
				}
				return nil
			})
			dst = append(dst, l)
			return err
		})
	})
	if err != nil {
		return dst, fmt.Errorf("%w: protobuf %v labels: %w", ErrBadObject, env.gvk, err)
	}
	return dst, nil
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

// jsonLabels is AppendLabels of a JSON object.
func jsonLabels(dst []Label, b []byte) ([]Label, error) {
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
				k, err := unquote(key, b, dec.InputOffset())
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
				vs, err := unquote(v, b, dec.InputOffset())
				if err != nil {
					return true, err
				}
				dst = append(dst, Label{Key: k, Value: vs})
				return true, nil
			})
		})
		if err == nil {
			err = errDone
		}
		return true, err
	})
	if err != nil && !errors.Is(err, errDone) {
		return dst, fmt.Errorf("%w: JSON labels: %w", ErrBadObject, err)
	}
	return dst, nil
}

// unquote returns the JSON string q, which ends at offset end of src (the
// decoder's input), unquoted, invalid UTF-8 replaced as the decoders
// replace it: src's own bytes when q is a plain string, else a copy.
func unquote(q, src []byte, end int64) ([]byte, error) {
	inner := q[1 : len(q)-1]
	if !bytes.ContainsRune(inner, '\\') && utf8.Valid(inner) {
		if start := end - int64(len(q)); start >= 0 && end <= int64(len(src)) {
			return src[start+1 : end-1], nil
		}
		return bytes.Clone(inner), nil
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
	return jsontext.AppendUnquote(nil, q)
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
