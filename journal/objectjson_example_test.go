package journal_test

import (
	"bytes"
	"fmt"
	"log"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/watchjournal/watchjournal/journal"
)

// Print an event's object in JSON, whichever encoding the journal stored
// it in: here a ConfigMap as a protobuf watch delivers it (the Kubernetes
// protobuf envelope), which package reconcile stores as it is.
func ExampleObjectJSON() {
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "a", Namespace: "ns", UID: "u1", ResourceVersion: "7"},
		Data: map[string]string{"k": "v"}}
	raw, _ := cm.Marshal()
	env, _ := (&runtime.Unknown{TypeMeta: runtime.TypeMeta{APIVersion: "v1", Kind: "ConfigMap"}, Raw: raw}).Marshal()
	e := journal.Event{Type: journal.Added, Key: "ns/a", Object: append([]byte("k8s\x00"), env...)}

	fmt.Println(bytes.HasPrefix(e.Object, []byte("k8s\x00"))) // protobuf, not JSON
	b, err := journal.ObjectJSON(e.Object)
	if err != nil {
		log.Fatal(err) // matches journal.ErrBadObject
	}
	fmt.Println(string(b))
	// Output:
	// true
	// {"kind":"ConfigMap","apiVersion":"v1","metadata":{"name":"a","namespace":"ns","uid":"u1","resourceVersion":"7"},"data":{"k":"v"}}
}
