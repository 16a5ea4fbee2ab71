package jcache

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer/protobuf"
	"k8s.io/client-go/kubernetes/scheme"
	toolscache "k8s.io/client-go/tools/cache"

	"github.com/watchjournal/watchjournal/journal"
)

// labelledFile is a file of n ConfigMaps in namespace ns, one in 100
// labelled sel=yes, the others sel=no, stored as JSON, or with proto as
// Kubernetes protobuf (as a watch of a built-in kind stores them).
func labelledFile(b testing.TB, n int, proto bool) *journal.Journal {
	pb := protobuf.NewSerializer(scheme.Scheme, scheme.Scheme)
	b.Helper()
	j, _ := configMapFile(b, n, func(i int, cm *corev1.ConfigMap) {
		cm.Labels = map[string]string{"sel": "no", "app": "bench", "i": fmt.Sprint(i)}
		if i%100 == 7 {
			cm.Labels["sel"] = "yes"
		}
		cm.Annotations = map[string]string{"note": "an annotation of some length, as objects carry"}
		cm.Data = map[string]string{"v": fmt.Sprint(i), "w": "some data of the object"}
	}, func(cm *corev1.ConfigMap) ([]byte, error) {
		var buf bytes.Buffer
		err := json.NewEncoder(&buf).Encode(cm)
		if proto {
			buf.Reset()
			err = pb.Encode(cm, &buf)
		}
		return buf.Bytes(), err
	})
	return j
}

// TestRead_PlannedSelectsAndLimits: a planned read of a namespace returns
// the objects its selector matches, in key order, at most its limit, and
// an unknown plan is an error.
func TestRead_PlannedSelectsAndLimits(t *testing.T) {
	inf := replayInformer(labelledFile(t, 1000, true), 0)
	inf.plans = &readPlans{}
	sel := labels.SelectorFromSet(labels.Set{"sel": "yes"})
	for _, tc := range []struct {
		name  string
		plan  readPlan
		value func(token string) string
		want  []string
	}{
		{"selector", readPlan{labels: sel}, func(tok string) string { return "ns/" + tok }, names(7, 100, 10)},
		{"selector, all namespaces", readPlan{labels: sel}, func(tok string) string { return allNamespacesPrefix + tok }, names(7, 100, 10)},
		{"selector, Limit 3", readPlan{labels: sel, limit: 3}, func(tok string) string { return "ns/" + tok }, names(7, 100, 3)},
		{"Limit 5", readPlan{limit: 5}, func(tok string) string { return "ns/" + tok }, names(0, 1, 5)},
		{"another namespace", readPlan{labels: sel}, func(tok string) string { return "other/" + tok }, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tok := inf.plans.add(&tc.plan)
			defer inf.plans.remove(tok)
			got, err := inf.idx.ByIndex(planIndex, tc.value(tok))
			if err != nil {
				t.Fatal(err)
			}
			var keys []string
			for _, o := range got {
				k, _ := toolscache.MetaNamespaceKeyFunc(o)
				keys = append(keys, k)
			}
			if fmt.Sprint(keys) != fmt.Sprint(tc.want) {
				t.Errorf("ByIndex = %v; want %v", keys, tc.want)
			}
		})
	}
	if _, err := inf.idx.ByIndex(planIndex, "ns/999"); err == nil {
		t.Error("ByIndex of an unknown plan succeeded")
	}
}

// names returns count keys ns/o<i> from first, step apart.
func names(first, step, count int) []string {
	var out []string
	for i := range count {
		out = append(out, fmt.Sprintf("ns/o%06d", first+i*step))
	}
	return out
}

// BenchmarkRead_LabelSelected: a List of a namespace of 1,000 ConfigMaps
// (JSON, protobuf) with a label selector that matches 10, as
// controller-runtime's reader does it over the indexer (every object
// decoded, then selected) and planned (labels read first, the 10
// decoded).
func BenchmarkRead_LabelSelected(b *testing.B) {
	sel := labels.SelectorFromSet(labels.Set{"sel": "yes"})
	for _, enc := range []string{"json", "protobuf"} {
		inf := replayInformer(labelledFile(b, 1000, enc == "protobuf"), 0)
		inf.plans = &readPlans{}
		b.Run(enc+"/decode all, then select", func(b *testing.B) {
			for b.Loop() {
				objs, err := inf.idx.ByIndex(toolscache.NamespaceIndex, "ns")
				var n int
				for _, o := range objs {
					if sel.Matches(labels.Set(o.(runtime.Object).(*corev1.ConfigMap).Labels)) {
						n++
					}
				}
				if err != nil || n != 10 {
					b.Fatalf("%d matches, %v", n, err)
				}
			}
		})
		b.Run(enc+"/planned", func(b *testing.B) {
			tok := inf.plans.add(&readPlan{labels: sel})
			for b.Loop() {
				if objs, err := inf.idx.ByIndex(planIndex, "ns/"+tok); err != nil || len(objs) != 10 {
					b.Fatalf("%d objects, %v", len(objs), err)
				}
			}
		})
	}
}

// BenchmarkRead_Get: a Get of one of 1,000 stored ConfigMaps (JSON,
// protobuf), typed and unstructured, and typed just after a handler was
// given the object (a deep copy of it for JSON, recent.go; protobuf is
// decoded as before).
func BenchmarkRead_Get(b *testing.B) {
	for _, enc := range []string{"json", "protobuf"} {
		j := labelledFile(b, 1000, enc == "protobuf")
		typed := replayInformer(j, 0)
		u := &unstructured.Unstructured{}
		u.SetGroupVersionKind(schema.GroupVersionKind{Version: "v1", Kind: "ConfigMap"})
		unstr := newInformer(typed.f, nil, u, schema.GroupVersionKind{Version: "v1", Kind: "ConfigMap"}, 0, nil, typed.log)
		// A second informer whose objects were all just given to a
		// handler (recent.go).
		given := replayInformer(j, 0)
		err := j.ViewObjects(func(v *journal.ObjectView) error {
			for i := range 1000 {
				k := fmt.Sprintf("ns/o%06d", i)
				b, _, err := v.Get(k)
				if err != nil {
					return err
				}
				o, err := given.decode(b)
				if err != nil {
					return err
				}
				given.recent.put(k, b, o)
			}
			return nil
		})
		if err != nil {
			b.Fatal(err)
		}
		for _, tc := range []struct {
			name string
			inf  *informer
		}{{"typed", typed}, {"unstructured", unstr}, {"typed, given to a handler", given}} {
			b.Run(enc+"/"+tc.name, func(b *testing.B) {
				i := 0
				var took []time.Duration
				for b.Loop() {
					k := fmt.Sprintf("ns/o%06d", i%1000)
					i += 7
					t0 := time.Now()
					_, ok, err := tc.inf.idx.GetByKey(k)
					took = append(took, time.Since(t0))
					if err != nil || !ok {
						b.Fatalf("GetByKey(%s) = %v, %v", k, ok, err)
					}
				}
				slices.Sort(took)
				b.ReportMetric(float64(took[len(took)/2].Nanoseconds()), "p50-ns")
				b.ReportMetric(float64(took[len(took)*99/100].Nanoseconds()), "p99-ns")
			})
		}
	}
}
