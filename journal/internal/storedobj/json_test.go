package storedobj

import (
	"encoding/json"
	"reflect"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	sjson "sigs.k8s.io/json"
)

// bothWays decodes b into a new T through Typed and through
// sigs.k8s.io/json (client-go's rules), and fails unless they agree.
func bothWays[T any, PT interface {
	*T
	runtime.Object
}](t *testing.T, what string, b []byte) PT {
	t.Helper()
	got, want := PT(new(T)), PT(new(T))
	if !isBuiltin(reflect.TypeOf(got).Elem()) {
		t.Fatalf("%T is not taken for a built-in type", got)
	}
	errGot := Typed(b, got)
	errWant := sjson.UnmarshalCaseSensitivePreserveInts(b, want)
	if (errGot == nil) != (errWant == nil) {
		t.Fatalf("%s: Typed error %v, sigs.k8s.io/json error %v", what, errGot, errWant)
	}
	if errGot == nil && !reflect.DeepEqual(got, want) {
		t.Fatalf("%s: Typed gives\n%+v\nsigs.k8s.io/json gives\n%+v", what, got, want)
	}
	return got
}

// Ensure that the encoding/json/v2 path for built-in types decodes exactly
// as client-go's sigs.k8s.io/json does: the ConfigMaps a real apiserver
// served (testdata/apiserver), objects with quantities, int-or-strings,
// times, pointers, raw extensions and metadata only, names in the wrong
// case (ignored, not matched), duplicate names, invalid UTF-8, null, and
// malformed input (an error both ways).
func TestTyped_SameAsClientGo(t *testing.T) {
	eachRecorded(t, func(f string, it json.RawMessage) {
		bothWays[corev1.ConfigMap](t, f, it)
		bothWays[metav1.PartialObjectMetadata](t, f+" as metadata", it)
	})
	pod := []byte(`{"kind":"Pod","apiVersion":"v1","metadata":{"name":"p","namespace":"n","uid":"0f1e2d3c-4b5a-6978-8796-a5b4c3d2e1f0","resourceVersion":"12","generation":3,"creationTimestamp":"2026-11-30T12:00:00Z","deletionTimestamp":null,"labels":{"a":"b"},"ownerReferences":[{"apiVersion":"apps/v1","kind":"ReplicaSet","name":"rs","uid":"u","controller":true,"blockOwnerDeletion":true}]},` +
		`"spec":{"containers":[{"name":"c","image":"i","ports":[{"containerPort":8080,"protocol":"TCP"}],"resources":{"limits":{"cpu":"500m","memory":"1Gi"},"requests":{"cpu":"0.25","memory":"128974848"}},` +
		`"livenessProbe":{"httpGet":{"path":"/","port":"http"},"initialDelaySeconds":3},"readinessProbe":{"tcpSocket":{"port":8080}}}],"terminationGracePeriodSeconds":30,"nodeSelector":{"k":"v"},` +
		`"tolerations":[{"key":"t","operator":"Exists","effect":"NoExecute","tolerationSeconds":300}],"securityContext":{"runAsUser":1000,"runAsNonRoot":true}},` +
		`"status":{"phase":"Running","conditions":[{"type":"Ready","status":"True","lastProbeTime":null,"lastTransitionTime":"2026-11-30T12:00:01Z"}],"startTime":"2026-11-30T12:00:00Z","podIP":"10.0.0.1"}}`)
	bothWays[corev1.Pod](t, "pod", pod)
	dep := []byte(`{"kind":"Deployment","apiVersion":"apps/v1","metadata":{"name":"d"},"spec":{"replicas":2,"selector":{"matchLabels":{"a":"b"},"matchExpressions":[{"key":"k","operator":"In","values":["x","y"]}]},` +
		`"strategy":{"type":"RollingUpdate","rollingUpdate":{"maxSurge":"25%","maxUnavailable":1}},"template":{"metadata":{"labels":{"a":"b"}},"spec":{"containers":[{"name":"c","image":"i"}]}}},"status":{"observedGeneration":5}}`)
	bothWays[appsv1.Deployment](t, "deployment", dep)
	ev := []byte(`{"kind":"Event","apiVersion":"v1","metadata":{"name":"e"},"involvedObject":{"kind":"Pod","name":"p"},"eventTime":"2026-11-30T12:00:00.123456Z","count":2,"series":{"count":3,"lastObservedTime":"2026-11-30T12:00:00.000001Z"}}`)
	bothWays[corev1.Event](t, "event (micro times)", ev)

	cm := bothWays[corev1.ConfigMap](t, "wrong case", []byte(`{"metadata":{"Name":"wrong","NAMESPACE":"x"},"Data":{"a":"b"},"data":{"c":"d"}}`))
	if cm.Name != "" || cm.Namespace != "" || len(cm.Data) != 1 || cm.Data["c"] != "d" {
		t.Fatalf("names in the wrong case matched: %+v", cm)
	}
	bothWays[corev1.ConfigMap](t, "duplicate names", []byte(`{"metadata":{"name":"a","name":"b"},"data":{"a":"1"},"data":{"b":"2"}}`))
	cm = bothWays[corev1.ConfigMap](t, "invalid UTF-8", []byte("{\"metadata\":{\"name\":\"a\xffb\"}}"))
	if cm.Name != "a\uFFFDb" {
		t.Fatalf("invalid UTF-8 decoded as %q", cm.Name)
	}
	bothWays[corev1.ConfigMap](t, "nulls", []byte(`{"metadata":null,"data":null,"binaryData":{"k":"aGk="},"immutable":null}`))
	bothWays[corev1.ConfigMap](t, "times", []byte(`{"metadata":{"creationTimestamp":"2026-11-30T12:00:00+02:00","deletionTimestamp":null,"managedFields":[{"time":null},{"time":"2026-11-30T12:00:00.5Z"}]}}`))
	for _, bad := range []string{`{"metadata":{"name":1}}`, `{"data":`, `[]`, `{"data":{"a":1}}`,
		`{"metadata":{"creationTimestamp":"yesterday"}}`, `{"metadata":{"creationTimestamp":12}}`, `{"metadata":{"creationTimestamp":"2026-11-30T12:00:00Z`} {
		bothWays[corev1.ConfigMap](t, "malformed "+bad, []byte(bad))
	}
}
