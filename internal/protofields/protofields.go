// Package protofields walks the length-delimited fields of a protobuf
// message without decoding it: what reconcile (a watch frame's envelope,
// an object's metadata) and the journal's stored-object decoder (the
// envelope of a stored object) read of Kubernetes protobuf.
package protofields

import "google.golang.org/protobuf/encoding/protowire"

// Each calls fn with the number and bytes of each length-delimited field
// of the protobuf message b, in order, and skips the others. The bytes are
// b's own, not copies. It returns fn's first error, or a
// protowire.ParseError for a malformed message.
func Each(b []byte, fn func(protowire.Number, []byte) error) error {
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return protowire.ParseError(n)
		}
		b = b[n:]
		if typ != protowire.BytesType {
			if n = protowire.ConsumeFieldValue(num, typ, b); n < 0 {
				return protowire.ParseError(n)
			}
			b = b[n:]
			continue
		}
		v, n := protowire.ConsumeBytes(b)
		if n < 0 {
			return protowire.ParseError(n)
		}
		b = b[n:]
		if err := fn(num, v); err != nil {
			return err
		}
	}
	return nil
}
