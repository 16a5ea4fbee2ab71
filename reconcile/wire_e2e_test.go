package reconcile_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"reflect"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/watchjournal/watchjournal/journal"
	"github.com/watchjournal/watchjournal/journal/cache"
	"github.com/watchjournal/watchjournal/reconcile"
)

// wireRun is one loop of a wire test: its journal and loop.
type wireRun struct {
	j      *journal.Journal
	loop   *reconcile.Loop
	cancel context.CancelFunc
	done   chan error
}

func startWire(t *testing.T, e *env, res journal.Resource, wire reconcile.Wire, name string) *wireRun {
	t.Helper()
	j, err := journal.Open(filepath.Join(t.TempDir(), name+".db"), &journal.Options{Resource: &res, NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	o := testOptions(t)
	o.Wire = wire
	l, err := reconcile.New(e.cp.ProxiedRESTConfig(e.proxy), j, o)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	r := &wireRun{j: j, loop: l, cancel: cancel, done: make(chan error, 1)}
	go func() { r.done <- l.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-r.done; err != nil {
			t.Errorf("Run = %v", err)
		}
		_ = j.Close()
	})
	return r
}

func (r *wireRun) wait(t *testing.T, what string, cond func(reconcile.Status) bool) reconcile.Status {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60e9)
	defer cancel()
	if err := r.loop.WaitFor(ctx, cond); err != nil {
		t.Fatalf("waiting for %s: %v; status %+v", what, err, r.loop.Status())
	}
	return r.loop.Status()
}

// Built-in kinds travel in protobuf by default, and the journal stores
// the protobuf as served, which reads back as what the apiserver serves in
// JSON: for ConfigMaps (data, binaryData, HTML-escaped and non-ASCII
// text), Services (ports, intstr) and Deployments (a pod template with
// quantities and a null creationTimestamp), a protobuf loop and a JSON one
// (Options.Wire = WireJSON) journal the same events, whose objects
// (journal.ObjectJSON for the protobuf ones) equal, as JSON values, each
// other and the server's JSON GET of the object; and decode, typed, as
// PartialObjectMetadata and unstructured (journal/cache), to equal
// objects. It covers the initial streaming list, watch events, and a
// relist after a 410 (nothing is decoded on the way in).
func TestLoop_Protobuf_StoresTheServedJSON(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	apps := e.kube.AppsV1().Deployments(e.ns)
	create := func(i int) {
		_, err := e.kube.CoreV1().ConfigMaps(e.ns).Create(ctx, &corev1.ConfigMap{
			ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("cm-%d", i), Labels: map[string]string{"app": "a"},
				Annotations: map[string]string{"note": "<b>&\u00e9\u4e16</b>"}},
			Data:       map[string]string{"k": fmt.Sprint(i), "html": "<&>", "empty": ""},
			BinaryData: map[string][]byte{"bin": {0, 1, 254, 255}},
		}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		_, err = e.kube.CoreV1().Services(e.ns).Create(ctx, &corev1.Service{
			ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("svc-%d", i)},
			Spec: corev1.ServiceSpec{Selector: map[string]string{"app": "a"}, Ports: []corev1.ServicePort{
				{Name: "http", Port: 80, TargetPort: intstr.FromString("web")},
				{Name: "metrics", Port: 9090, TargetPort: intstr.FromInt32(9091), Protocol: corev1.ProtocolUDP}}},
		}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		replicas := int32(i)
		_, err = apps.Create(ctx, &appsv1.Deployment{
			ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("dep-%d", i)},
			Spec: appsv1.DeploymentSpec{Replicas: &replicas,
				Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "a"}},
				Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "a"}},
					Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "img:1",
						Resources: corev1.ResourceRequirements{Limits: corev1.ResourceList{
							corev1.ResourceCPU: resource.MustParse("1500m"), corev1.ResourceMemory: resource.MustParse("1Gi")}}}}}}},
		}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
	}
	for i := 0; i < 3; i++ {
		create(i)
	}
	resources := []schema.GroupVersionResource{
		{Version: "v1", Resource: "configmaps"},
		{Version: "v1", Resource: "services"},
		{Group: "apps", Version: "v1", Resource: "deployments"},
	}
	type pair struct{ pb, js *wireRun }
	var runs []pair
	for i, gvr := range resources {
		res := journal.Resource{GVR: gvr, Namespace: e.ns}
		runs = append(runs, pair{startWire(t, e, res, reconcile.WireAuto, fmt.Sprint("pb", i)), startWire(t, e, res, reconcile.WireJSON, fmt.Sprint("js", i))})
	}
	for i, r := range runs {
		if st := r.pb.wait(t, "initial list", watching(1)); st.Encoding != "protobuf" {
			t.Errorf("%v: Status.Encoding = %q with Wire auto; want protobuf", resources[i], st.Encoding)
		}
		if st := r.js.wait(t, "initial list", watching(1)); st.Encoding != "json" {
			t.Errorf("%v: Status.Encoding = %q with WireJSON; want json", resources[i], st.Encoding)
		}
	}
	// Watch events: new objects and a change.
	create(3)
	cm, err := e.kube.CoreV1().ConfigMaps(e.ns).Get(ctx, "cm-0", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	cm.Data["k"] = "changed <while watching>"
	if _, err := e.kube.CoreV1().ConfigMaps(e.ns).Update(ctx, cm, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	wantHeads := []uint64{5, 4, 4} // cm: 4 ADDED + MODIFIED; svc, dep: 4 ADDED
	for i, r := range runs {
		for _, run := range []*wireRun{r.pb, r.js} {
			wctx, cancel := context.WithTimeout(ctx, 60e9)
			if err := run.j.Wait(wctx, wantHeads[i]-1); err != nil {
				t.Fatalf("%v: waiting for offset %d: %v; status %+v", resources[i], wantHeads[i], err, run.loop.Status())
			}
			cancel()
		}
	}
	// A relist after a 410 while the loops are cut off (the lazy path:
	// only the changed objects are decoded): a delete, a change, a
	// recreation under the same name, a scale.
	e.proxy.Cut()
	if err := e.kube.CoreV1().ConfigMaps(e.ns).Delete(ctx, "cm-1", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	cm, err = e.kube.CoreV1().ConfigMaps(e.ns).Get(ctx, "cm-2", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	cm.Data["k"] = "changed while cut off"
	if _, err := e.kube.CoreV1().ConfigMaps(e.ns).Update(ctx, cm, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := e.kube.CoreV1().Services(e.ns).Delete(ctx, "svc-1", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := e.kube.AppsV1().Deployments(e.ns).Delete(ctx, "dep-1", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	create(1) // cm-1, svc-1 and dep-1 again: new UIDs
	e.compact()
	e.proxy.Heal()
	for _, r := range runs {
		for _, run := range []*wireRun{r.pb, r.js} {
			if st := run.wait(t, "relist after 410", watching(2)); st.Gone < 1 {
				t.Errorf("Status.Gone = %d; want a 410", st.Gone)
			}
		}
	}

	typedOf := []func() runtime.Object{
		func() runtime.Object { return &corev1.ConfigMap{} },
		func() runtime.Object { return &corev1.Service{} },
		func() runtime.Object { return &appsv1.Deployment{} },
	}
	for i, r := range runs {
		pb, err := readAll(r.pb.j, 1)
		if err != nil {
			t.Fatal(err)
		}
		js, err := readAll(r.js.j, 1)
		if err != nil {
			t.Fatal(err)
		}
		if len(pb) != len(js) {
			t.Fatalf("%v: protobuf journal has %d events, JSON journal %d", resources[i], len(pb), len(js))
		}
		protobuf := 0
		for k := range pb {
			a, b := pb[k], js[k]
			if a.Type != b.Type || a.Key != b.Key || a.ResourceVersion != b.ResourceVersion || a.UID != b.UID {
				t.Errorf("%v event %d: protobuf %s %s %s, JSON %s %s %s", resources[i], k, a.Type, a.Key, a.ResourceVersion, b.Type, b.Key, b.ResourceVersion)
				continue
			}
			if len(a.Object) == 0 || len(b.Object) == 0 {
				if len(a.Object) != len(b.Object) || a.Type != journal.Deleted {
					t.Errorf("%v event %d (%s %s): protobuf object %q, JSON object %q", resources[i], k, a.Type, a.Key, a.Object, b.Object)
				}
				continue // a relist's tombstone: no object
			}
			if bytes.HasPrefix(a.Object, []byte("k8s\x00")) {
				protobuf++
			}
			if aj := objectJSON(t, a.Object); !sameJSON(t, aj, b.Object) {
				t.Errorf("%v event %d (%s %s): objects differ\nprotobuf %s\n    JSON %s", resources[i], k, a.Type, a.Key, aj, b.Object)
			}
			sameDecoded(t, fmt.Sprintf("%v event %d (%s %s)", resources[i], k, a.Type, a.Key), a.Object, b.Object, typedOf[i])
		}
		if protobuf == 0 {
			t.Errorf("%v: no object of the protobuf loop's journal is stored in protobuf", resources[i])
		}
		// The last event of each live key against the server's JSON.
		last := map[string]journal.Event{}
		for _, ev := range pb {
			last[ev.Key] = ev
		}
		for key, ev := range last {
			if ev.Type == journal.Deleted {
				continue
			}
			gvr := resources[i]
			prefix := "/apis/" + gvr.Group + "/" + gvr.Version
			if gvr.Group == "" {
				prefix = "/api/" + gvr.Version
			}
			ns, name := splitKey(key)
			raw, err := e.kube.CoreV1().RESTClient().Get().AbsPath(prefix, "namespaces", ns, gvr.Resource, name).
				SetHeader("Accept", "application/json").DoRaw(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if obj := objectJSON(t, ev.Object); !sameJSON(t, obj, raw) {
				t.Errorf("%v %s: journal (protobuf) differs from the server's JSON\njournal %s\n server %s", gvr, key, obj, raw)
			}
		}
	}
}

func splitKey(key string) (ns, name string) {
	for i := range key {
		if key[i] == '/' {
			return key[:i], key[i+1:]
		}
	}
	return "", key
}

// sameJSON reports whether a and b are equal JSON values.
func sameJSON(t *testing.T, a, b []byte) bool {
	t.Helper()
	var x, y any
	if err := json.Unmarshal(a, &x); err != nil {
		t.Fatalf("%v: %s", err, a)
	}
	if err := json.Unmarshal(b, &y); err != nil {
		t.Fatalf("%v: %s", err, b)
	}
	return reflect.DeepEqual(x, y)
}

// objectJSON is journal.ObjectJSON, failing t on an error.
func objectJSON(t *testing.T, b []byte) []byte {
	t.Helper()
	j, err := journal.ObjectJSON(b)
	if err != nil {
		t.Fatalf("ObjectJSON: %v", err)
	}
	return j
}

// sameDecoded fails t unless the stored objects pb and js (the same object
// in two encodings) decode to equal objects through journal/cache: typed
// (a new one from newTyped), PartialObjectMetadata and unstructured.
func sameDecoded(t *testing.T, what string, pb, js []byte, newTyped func() runtime.Object) {
	t.Helper()
	a, b := newTyped(), newTyped()
	if err := cache.DecodeInto(pb, a); err != nil {
		t.Fatalf("%s: DecodeInto(protobuf): %v", what, err)
	}
	if err := cache.DecodeInto(js, b); err != nil {
		t.Fatalf("%s: DecodeInto(JSON): %v", what, err)
	}
	if !apiequality.Semantic.DeepEqual(a, b) || a.GetObjectKind().GroupVersionKind() != b.GetObjectKind().GroupVersionKind() {
		t.Errorf("%s: typed objects differ\nprotobuf %+v\n    JSON %+v", what, a, b)
	}
	var ma, mb metav1.PartialObjectMetadata
	if err := cache.DecodeInto(pb, &ma); err != nil {
		t.Fatalf("%s: DecodeInto(protobuf, metadata): %v", what, err)
	}
	if err := cache.DecodeInto(js, &mb); err != nil {
		t.Fatalf("%s: DecodeInto(JSON, metadata): %v", what, err)
	}
	if !apiequality.Semantic.DeepEqual(ma, mb) {
		t.Errorf("%s: metadata differ\nprotobuf %+v\n    JSON %+v", what, ma, mb)
	}
	ua, err := cache.Unstructured(pb)
	if err != nil {
		t.Fatalf("%s: Unstructured(protobuf): %v", what, err)
	}
	ub, err := cache.Unstructured(js)
	if err != nil {
		t.Fatalf("%s: Unstructured(JSON): %v", what, err)
	}
	if !reflect.DeepEqual(ua.Object, ub.Object) {
		t.Errorf("%s: unstructured objects differ\nprotobuf %v\n    JSON %v", what, ua.Object, ub.Object)
	}
}
