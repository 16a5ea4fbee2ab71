package main

import (
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"

	"github.com/watchjournal/watchjournal/journal"
)

// protoEnvelope is obj as a protobuf watch delivers it and package
// reconcile stores it: "k8s\x00", then a runtime.Unknown.
func protoEnvelope(t *testing.T, obj *corev1.ConfigMap) []byte {
	t.Helper()
	raw, err := obj.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	u := runtime.Unknown{TypeMeta: runtime.TypeMeta{APIVersion: "v1", Kind: "ConfigMap"}, Raw: raw}
	b, err := u.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	return append([]byte("k8s\x00"), b...)
}

// events -o json and -o yaml print the same on a journal whose objects are
// stored in protobuf as on one that stores the JSON the apiserver would
// have served for them (what a protobuf loop stored before schema 4),
// managedFields left out, or kept with --show-managed-fields.
func TestEvents_File_Protobuf(t *testing.T) {
	cm := func(rv, v string) *corev1.ConfigMap {
		return &corev1.ConfigMap{
			ObjectMeta: metav1.ObjectMeta{Name: "a", Namespace: "wj", UID: types.UID("u1"), ResourceVersion: rv,
				CreationTimestamp: metav1.NewTime(time.Date(2026, 7, 1, 12, 0, 0, 0, time.UTC)),
				Labels:            map[string]string{"app": "<web>"},
				ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "kubectl", Operation: metav1.ManagedFieldsOperationApply,
					APIVersion: "v1", FieldsType: "FieldsV1", FieldsV1: &metav1.FieldsV1{Raw: []byte(`{"f:data":{}}`)}}}},
			Data:       map[string]string{"v": v, "ü": "日本"},
			BinaryData: map[string][]byte{"bin": {0, 1, 255}},
		}
	}
	objs := []*corev1.ConfigMap{cm("10", "1"), cm("12", "2")}
	write := func(name string, encode func(*corev1.ConfigMap) []byte) string {
		path := filepath.Join(tempDir(t), name)
		j := openJournal(t, path)
		add := ev(journal.Added, "wj/a", "u1", "10", 0)
		mod := ev(journal.Modified, "wj/a", "u1", "12", 1)
		mod.PrevResourceVersion = "10"
		add.Object, mod.Object = encode(objs[0]), encode(objs[1])
		appendEvents(t, j, "12", add, mod)
		if err := j.Close(); err != nil {
			t.Fatal(err)
		}
		return path
	}
	jsPath := write("js.db", func(o *corev1.ConfigMap) []byte {
		o = o.DeepCopy()
		o.Kind, o.APIVersion = "ConfigMap", "v1"
		b, err := json.Marshal(o)
		if err != nil {
			t.Fatal(err)
		}
		return b
	})
	pbPath := write("pb.db", func(o *corev1.ConfigMap) []byte { return protoEnvelope(t, o) })
	for _, args := range [][]string{{"-o", "json"}, {"-o", "yaml"}, {"-o", "json", "--show-managed-fields"}} {
		want, stderr, code := runCLI(append([]string{"events", "--db", jsPath}, args...)...)
		if code != 0 || !strings.Contains(want, "resourceVersion") || !strings.Contains(want, "AAH/") {
			t.Fatalf("events %v on the JSON journal: exit %d, stdout\n%s\nstderr %s", args, code, want, stderr)
		}
		got, stderr, code := runCLI(append([]string{"events", "--db", pbPath}, args...)...)
		if code != 0 || got != want {
			t.Errorf("events %v on the protobuf journal: exit %d, stdout\n%s\nstderr %s\nwant (the JSON journal's)\n%s", args, code, got, stderr, want)
		}
		if hasMF := strings.Contains(got, "managedFields"); hasMF != (len(args) == 3) {
			t.Errorf("events %v: managedFields shown = %v", args, hasMF)
		}
	}
}
