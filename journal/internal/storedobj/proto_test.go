package storedobj

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
)

// envelopeOf returns obj in Kubernetes protobuf as the apiserver sends it:
// "k8s\x00", then a runtime.Unknown with apiVersion, kind and the message.
func envelopeOf(t testing.TB, apiVersion, kind string, obj interface{ Marshal() ([]byte, error) }) []byte {
	t.Helper()
	raw, err := obj.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	u := runtime.Unknown{TypeMeta: runtime.TypeMeta{APIVersion: apiVersion, Kind: kind}, Raw: raw}
	b, err := u.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	return append(append([]byte(nil), protoMagic...), b...)
}

// eachRecorded calls fn with each ConfigMap a real apiserver served
// (testdata/apiserver), as its list held it, and the file it came from.
func eachRecorded(t *testing.T, fn func(file string, item json.RawMessage)) {
	t.Helper()
	for _, f := range []string{"list-page1.json", "list-page2.json", "list-after-watch.json"} {
		b, err := os.ReadFile(filepath.Join("..", "..", "..", "testdata", "apiserver", f))
		if err != nil {
			t.Fatal(err)
		}
		var l struct{ Items []json.RawMessage }
		if err := json.Unmarshal(b, &l); err != nil || len(l.Items) == 0 {
			t.Fatalf("%s: %d items, %v", f, len(l.Items), err)
		}
		for _, it := range l.Items {
			fn(f, it)
		}
	}
}

// recorded returns the ConfigMaps a real apiserver served
// (testdata/apiserver), as served in JSON.
func recorded(t *testing.T) [][]byte {
	t.Helper()
	var out [][]byte
	eachRecorded(t, func(_ string, it json.RawMessage) {
		// A list's items carry no kind and apiVersion; the journal
		// stores them with both (reconcile's typed).
		var m map[string]any
		if err := json.Unmarshal(it, &m); err != nil {
			t.Fatal(err)
		}
		m["kind"], m["apiVersion"] = "ConfigMap", "v1"
		b, err := json.Marshal(m)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, b)
	})
	return out
}

// The same object stored in protobuf and in JSON decodes to the same
// typed object (kind and apiVersion set), the same PartialObjectMetadata,
// the same unstructured object, the same metadata and type meta, and JSON
// gives back the JSON value: for each ConfigMap a real apiserver served,
// and a Pod with quantities, probes, times and an int-or-string.
func TestProto_SameAsJSON(t *testing.T) {
	type pair struct {
		name     string
		js, pb   []byte
		newTyped func() runtime.Object
	}
	var pairs []pair
	for _, js := range recorded(t) {
		var cm corev1.ConfigMap
		if err := Typed(js, &cm); err != nil {
			t.Fatal(err)
		}
		pairs = append(pairs, pair{"configmap " + cm.Name, js, envelopeOf(t, "v1", "ConfigMap", &cm), func() runtime.Object { return &corev1.ConfigMap{} }})
	}
	podJSON := []byte(`{"kind":"Pod","apiVersion":"v1","metadata":{"name":"p","namespace":"n","uid":"0f1e2d3c-4b5a-6978-8796-a5b4c3d2e1f0","resourceVersion":"12","generation":3,"creationTimestamp":"2026-11-30T12:00:00Z","labels":{"a":"b"},"ownerReferences":[{"apiVersion":"apps/v1","kind":"ReplicaSet","name":"rs","uid":"u","controller":true,"blockOwnerDeletion":true}]},` +
		`"spec":{"containers":[{"name":"c","image":"i","ports":[{"containerPort":8080,"protocol":"TCP"}],"resources":{"limits":{"cpu":"500m","memory":"1Gi"},"requests":{"cpu":"250m","memory":"128974848"}},` +
		`"livenessProbe":{"httpGet":{"path":"/","port":"http"},"initialDelaySeconds":3},"readinessProbe":{"tcpSocket":{"port":8080}}}],"terminationGracePeriodSeconds":30,"nodeSelector":{"k":"v"},` +
		`"tolerations":[{"key":"t","operator":"Exists","effect":"NoExecute","tolerationSeconds":300}],"securityContext":{"runAsUser":1000,"runAsNonRoot":true}},` +
		`"status":{"phase":"Running","conditions":[{"type":"Ready","status":"True","lastProbeTime":null,"lastTransitionTime":"2026-11-30T12:00:01Z"}],"startTime":"2026-11-30T12:00:00Z","podIP":"10.0.0.1"}}`)
	var pod corev1.Pod
	if err := Typed(podJSON, &pod); err != nil {
		t.Fatal(err)
	}
	pairs = append(pairs, pair{"pod", podJSON, envelopeOf(t, "v1", "Pod", &pod), func() runtime.Object { return &corev1.Pod{} }})

	for _, p := range pairs {
		if !IsProto(p.pb) || IsProto(p.js) {
			t.Fatalf("%s: IsProto(protobuf) = %v, IsProto(JSON) = %v", p.name, IsProto(p.pb), IsProto(p.js))
		}
		fromJS, fromPB := p.newTyped(), p.newTyped()
		if err := Typed(p.js, fromJS); err != nil {
			t.Fatal(err)
		}
		if err := Typed(p.pb, fromPB); err != nil {
			t.Fatalf("%s: Typed(protobuf) = %v", p.name, err)
		}
		if !apiequality.Semantic.DeepEqual(fromJS, fromPB) || fromPB.GetObjectKind().GroupVersionKind() != fromJS.GetObjectKind().GroupVersionKind() {
			t.Errorf("%s: typed from protobuf\n%+v\nfrom JSON\n%+v", p.name, fromPB, fromJS)
		}
		var mJS, mPB metav1.PartialObjectMetadata
		if err := Typed(p.js, &mJS); err != nil {
			t.Fatal(err)
		}
		if err := Typed(p.pb, &mPB); err != nil {
			t.Fatalf("%s: Typed(protobuf, PartialObjectMetadata) = %v", p.name, err)
		}
		if !apiequality.Semantic.DeepEqual(mJS, mPB) {
			t.Errorf("%s: metadata from protobuf\n%+v\nfrom JSON\n%+v", p.name, mPB, mJS)
		}
		uJS, err := Unstructured(p.js)
		if err != nil {
			t.Fatal(err)
		}
		uPB, err := Unstructured(p.pb)
		if err != nil {
			t.Fatalf("%s: Unstructured(protobuf) = %v", p.name, err)
		}
		if !reflect.DeepEqual(uJS.Object, uPB.Object) {
			t.Errorf("%s: unstructured from protobuf\n%v\nfrom JSON\n%v", p.name, uPB.Object, uJS.Object)
		}
		j, err := JSON(p.pb)
		if err != nil {
			t.Fatalf("%s: JSON(protobuf) = %v", p.name, err)
		}
		var a, b any
		if err := json.Unmarshal(j, &a); err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal(p.js, &b); err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(a, b) {
			t.Errorf("%s: JSON(protobuf)\n%s\nwant\n%s", p.name, j, p.js)
		}
		if j, err := JSON(p.js); err != nil || &j[0] != &p.js[0] {
			t.Errorf("%s: JSON(JSON) is not the bytes themselves (%v)", p.name, err)
		}
		for _, b := range [][]byte{p.js, p.pb} {
			v, k, err := TypeMeta(b)
			if err != nil || v != fromJS.GetObjectKind().GroupVersionKind().GroupVersion().String() || k != fromJS.GetObjectKind().GroupVersionKind().Kind {
				t.Errorf("%s: TypeMeta = %q, %q, %v", p.name, v, k, err)
			}
			m, err := ReadMeta(b)
			if err != nil || m.Name != mJS.Name || m.Namespace != mJS.Namespace || m.UID != string(mJS.UID) ||
				m.ResourceVersion != mJS.ResourceVersion || !reflect.DeepEqual(m.Labels, mJS.Labels) {
				t.Errorf("%s: ReadMeta = %+v, %v; want the metadata of %+v", p.name, m, err, mJS.ObjectMeta)
			}
			if l, err := Labels(b); err != nil || !reflect.DeepEqual(l, mJS.Labels) {
				t.Errorf("%s: Labels = %v, %v; want %v", p.name, l, err, mJS.Labels)
			}
		}
	}
}

// Protobuf that does not decode, of a kind the scheme does not know, or
// into another Go type is an error matching ErrBadObject from every
// decoder, never a panic.
func TestProto_Errors(t *testing.T) {
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "a", Namespace: "ns", UID: "u", ResourceVersion: "1"}, Data: map[string]string{"k": "v"}}
	good := envelopeOf(t, "v1", "ConfigMap", cm)
	truncated := good[:len(good)-3]
	badRaw := envelopeOf(t, "v1", "ConfigMap", rawMessage{0x0a, 0xff}) // metadata: a length past the end
	unknown := envelopeOf(t, "v1", "NoSuchKind", cm)
	noKind := append(append([]byte(nil), protoMagic...), 0x0a, 0x00)
	for name, b := range map[string][]byte{"truncated": truncated, "bad message": badRaw, "unknown kind": unknown, "no kind": noKind, "magic only": protoMagic} {
		if err := Typed(b, &corev1.ConfigMap{}); !errors.Is(err, ErrBadObject) {
			t.Errorf("%s: Typed = %v; want ErrBadObject", name, err)
		}
		if err := Typed(b, &metav1.PartialObjectMetadata{}); !errors.Is(err, ErrBadObject) {
			t.Errorf("%s: Typed(PartialObjectMetadata) = %v; want ErrBadObject", name, err)
		}
		if _, err := Unstructured(b); !errors.Is(err, ErrBadObject) {
			t.Errorf("%s: Unstructured = %v; want ErrBadObject", name, err)
		}
		if _, err := JSON(b); !errors.Is(err, ErrBadObject) {
			t.Errorf("%s: JSON = %v; want ErrBadObject", name, err)
		}
		if _, err := ReadMeta(b); !errors.Is(err, ErrBadObject) {
			t.Errorf("%s: ReadMeta = %v; want ErrBadObject", name, err)
		}
		if _, err := Labels(b); !errors.Is(err, ErrBadObject) {
			t.Errorf("%s: Labels = %v; want ErrBadObject", name, err)
		}
	}
	if err := Typed(good, &corev1.Secret{}); !errors.Is(err, ErrBadObject) {
		t.Errorf("a ConfigMap into a *corev1.Secret: %v; want ErrBadObject", err)
	}
	if err := Typed(good, &unstructured.Unstructured{}); !errors.Is(err, ErrBadObject) {
		t.Errorf("a ConfigMap into an *unstructured.Unstructured through Typed: %v; want ErrBadObject", err)
	}
}

// rawMessage marshals to itself: a message's bytes given by hand.
type rawMessage []byte

func (r rawMessage) Marshal() ([]byte, error) { return r, nil }

// FuzzProto: any bytes after the protobuf prefix decode or fail with
// ErrBadObject, through every decoder; never a panic.
func FuzzProto(f *testing.F) {
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "a", Namespace: "ns", UID: "u", ResourceVersion: "1"}, Data: map[string]string{"k": "v"}}
	f.Add(envelopeOf(f, "v1", "ConfigMap", cm)[len(protoMagic):])
	f.Add(envelopeOf(f, "v1", "Pod", &corev1.Pod{ObjectMeta: cm.ObjectMeta})[len(protoMagic):])
	f.Fuzz(func(t *testing.T, b []byte) {
		b = append(append([]byte(nil), protoMagic...), b...)
		for _, err := range []error{Typed(b, &corev1.ConfigMap{}), Typed(b, &corev1.Pod{}), Typed(b, &metav1.PartialObjectMetadata{})} {
			if err != nil && !errors.Is(err, ErrBadObject) {
				t.Fatalf("Typed: %v, not ErrBadObject", err)
			}
		}
		if _, err := Unstructured(b); err != nil && !errors.Is(err, ErrBadObject) {
			t.Fatalf("Unstructured: %v", err)
		}
		if _, err := JSON(b); err != nil && !errors.Is(err, ErrBadObject) {
			t.Fatalf("JSON: %v", err)
		}
	})
}

// TestJSON_OnlyJSONObjectsPassThrough: JSON returns a JSON object (white
// space before it allowed) and an empty object slot as they are, and
// refuses bytes that are neither a JSON object nor Kubernetes protobuf
// (a sealed envelope not opened, damage) with ErrBadObject, so that a
// caller never hands them on as JSON.
func TestJSON_OnlyJSONObjectsPassThrough(t *testing.T) {
	for _, in := range []string{`{"kind":"ConfigMap"}`, " \n{}", ""} {
		out, err := JSON([]byte(in))
		if err != nil || string(out) != in {
			t.Errorf("JSON(%q) = %q, %v; want it as it is", in, out, err)
		}
	}
	for _, in := range []string{"\x00\x01sealed", "[1,2]", "null", "   ", "k8s"} {
		if out, err := JSON([]byte(in)); !errors.Is(err, ErrBadObject) {
			t.Errorf("JSON(%q) = %q, %v; want an error matching ErrBadObject", in, out, err)
		}
	}
}
