package reconcile

import (
	"bytes"
	"errors"
	"testing"
)

// TestTransformed: the client's transform replaces an Item's object; a
// result that loses or changes the key, UID or resourceVersion, or an
// error of the transform, is ErrTransform; no transform keeps the object.
func TestTransformed(t *testing.T) {
	in := Item{Key: "ns/a", UID: "u1", ResourceVersion: "7",
		Object: []byte(`{"kind":"ConfigMap","apiVersion":"v1","metadata":{"name":"a","namespace":"ns","uid":"u1","resourceVersion":"7","annotations":{"secret.example/token":"t"}}}`)}
	drop := []byte(`{"kind":"ConfigMap","apiVersion":"v1","metadata":{"name":"a","namespace":"ns","uid":"u1","resourceVersion":"7"}}`)
	for _, tc := range []struct {
		name    string
		fn      func([]byte) ([]byte, error)
		want    []byte
		wantErr bool
	}{
		{"no transform keeps the object", nil, in.Object, false},
		{"the result is stored", func([]byte) ([]byte, error) { return drop, nil }, drop, false},
		{"a result without resourceVersion is refused", func([]byte) ([]byte, error) {
			return []byte(`{"metadata":{"name":"a","namespace":"ns","uid":"u1"}}`), nil
		}, nil, true},
		{"a result with another name is refused", func([]byte) ([]byte, error) {
			return []byte(`{"metadata":{"name":"b","namespace":"ns","uid":"u1","resourceVersion":"7"}}`), nil
		}, nil, true},
		{"a result that is not an object is refused", func([]byte) ([]byte, error) { return []byte(`[`), nil }, nil, true},
		{"the transform's error is refused", func([]byte) ([]byte, error) { return nil, errors.New("no") }, nil, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := &client{transform: tc.fn}
			got, err := c.transformed(in)
			if tc.wantErr {
				if !errors.Is(err, ErrTransform) {
					t.Fatalf("transformed = %q, %v; want ErrTransform", got.Object, err)
				}
				return
			}
			if err != nil || !bytes.Equal(got.Object, tc.want) || got.Key != in.Key || got.UID != in.UID || got.ResourceVersion != in.ResourceVersion {
				t.Fatalf("transformed = %+v, %v; want the object %s", got, err, tc.want)
			}
		})
	}
}
