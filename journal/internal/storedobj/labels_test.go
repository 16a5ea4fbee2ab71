package storedobj

import (
	"errors"
	"reflect"
	"testing"

	corev1 "k8s.io/api/core/v1"
)

// Labels of JSON agrees with a full decode on escapes, invalid UTF-8, no
// labels, null labels and labels after other members; JSON that is not
// an object is ErrBadObject.
func TestLabels_JSON(t *testing.T) {
	for _, js := range []string{
		`{"kind":"ConfigMap","apiVersion":"v1","metadata":{"name":"n","labels":{"a":"b","c\u0064":"x\"y\\z"}},"data":{"labels":"no"}}`,
		`{"data":{"k":"v"},"metadata":{"annotations":{"labels":"{}"},"labels":{"k":"v` + "\xff" + `"}}}`,
		`{"metadata":{"name":"n"}}`,
		`{"metadata":{"labels":null}}`,
		`{"metadata":null}`,
		`{}`,
	} {
		var cm corev1.ConfigMap
		if err := Typed([]byte(js), &cm); err != nil {
			t.Fatal(err)
		}
		got, err := Labels([]byte(js))
		if err != nil || !reflect.DeepEqual(got, cm.Labels) {
			t.Errorf("Labels(%s) = %q, %v; want %q", js, got, err, cm.Labels)
		}
	}
	for _, js := range []string{`[]`, `{"metadata":{"labels":{"a":1}}}`, `{"metadata":{"labels":{"a":"b"`, `{"metadata":[]}`} {
		if _, err := Labels([]byte(js)); !errors.Is(err, ErrBadObject) {
			t.Errorf("Labels(%s) = %v; want ErrBadObject", js, err)
		}
	}
}

// AppendLabels gives JSON's plain keys and values as the stored bytes
// themselves, at their place.
func TestAppendLabels_AliasesJSON(t *testing.T) {
	js := []byte(`{"metadata":{"labels":{"a":"b","c\u0064":"e"}}}`)
	ls, err := AppendLabels(nil, js)
	if err != nil || len(ls) != 2 {
		t.Fatalf("AppendLabels = %q, %v", ls, err)
	}
	if string(ls[0].Key) != "a" || string(ls[0].Value) != "b" || &ls[0].Key[0] != &js[24] || &ls[0].Value[0] != &js[28] {
		t.Errorf("first label %q=%q does not alias the stored bytes", ls[0].Key, ls[0].Value)
	}
	if string(ls[1].Key) != "cd" || string(ls[1].Value) != "e" {
		t.Errorf("second label %q=%q; want cd=e", ls[1].Key, ls[1].Value)
	}
}
