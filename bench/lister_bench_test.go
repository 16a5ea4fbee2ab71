package bench

// Benchmarks of journal/cache's reads against an informer's lister, in
// process: 1,000 ConfigMaps of about 1 KiB in namespace "bench" among
// listerOthers in other namespaces.
//
//	BenchmarkReaderGet    ns/op of Reader.Get (typed) vs the informer
//	                      lister's Get + DeepCopy (what controller-runtime's
//	                      cache returns), and the unstructured Get;
//	                      decode-only is client-go's decode of one object,
//	                      decode-only/sigs.k8s.io-json the JSON pass the
//	                      reader makes (its floor per object)
//	BenchmarkReaderList   ns/op of Reader.List of the namespace (typed) vs
//	                      the lister's List + DeepCopy of each item
//
// journal/... reads a file whose objects are stored in JSON (custom
// resources, WireJSON, files before schema 4), journal-protobuf/... one
// holding the same objects as a protobuf watch delivers them (the
// Kubernetes protobuf envelope, what reconcile stores for built-in kinds).

import (
	"context"
	"fmt"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes/scheme"
	listersv1 "k8s.io/client-go/listers/core/v1"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	sjson "sigs.k8s.io/json"

	"github.com/watchjournal/watchjournal/journal"
	"github.com/watchjournal/watchjournal/journal/cache"
)

const (
	listerN      = 1000
	listerOthers = 9000
)

// listerObject is object(i) placed in namespace ns.
func listerObject(i int, ns string) []byte {
	b := object(i, rv(i))
	return []byte(replaceOnce(string(b), `"namespace":"bench"`, fmt.Sprintf(`"namespace":%q`, ns)))
}

func replaceOnce(s, old, new string) string {
	for i := 0; i+len(old) <= len(s); i++ {
		if s[i:i+len(old)] == old {
			return s[:i] + new + s[i+len(old):]
		}
	}
	return s
}

// listerFixture returns a journal and an informer indexer holding the same
// objects: listerN in "bench", listerOthers in "other-<i%10>"; the journal
// stores them in protobuf (the apiserver's envelope) when pb is set, else
// in JSON.
func listerFixture(b *testing.B, pb bool) (*journal.Journal, toolscache.Indexer) {
	b.Helper()
	fixture()
	res := journal.Resource{GVR: schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}, Kind: "ConfigMap", APIVersion: "v1"}
	j := openJournalRes(b, res)
	if err := j.Settings().KeepObjects(); err != nil {
		b.Fatal(err)
	}
	idx := toolscache.NewIndexer(toolscache.MetaNamespaceKeyFunc, toolscache.Indexers{toolscache.NamespaceIndex: toolscache.MetaNamespaceIndexFunc})
	dec := scheme.Codecs.UniversalDeserializer()
	total := listerN + listerOthers
	for lo := 0; lo < total; lo += 1000 {
		err := j.Writer().Update(func(tx *journal.Tx) error {
			for i := lo; i < min(lo+1000, total); i++ {
				ns := "bench"
				if i >= listerN {
					ns = fmt.Sprintf("other-%d", i%10)
				}
				obj := listerObject(i, ns)
				o, _, err := dec.Decode(obj, nil, nil)
				if err != nil {
					return err
				}
				if err := idx.Add(o); err != nil {
					return err
				}
				if pb {
					obj = protoEnvelope(b, o.(*corev1.ConfigMap))
				}
				e := journal.Event{Type: journal.Added, Key: fmt.Sprintf("%s/cm-%06d", ns, i), UID: uids[i], ResourceVersion: rv(i), Object: obj, Origin: journal.OriginRelist}
				if _, err := tx.Append(&e); err != nil {
					return err
				}
			}
			return tx.SetResourceVersion(rv(total))
		})
		if err != nil {
			b.Fatal(err)
		}
	}
	return j, idx
}

// protoEnvelope is cm as the apiserver sends it in protobuf: "k8s\x00",
// then a runtime.Unknown with apiVersion, kind and the message.
func protoEnvelope(b *testing.B, cm *corev1.ConfigMap) []byte {
	raw, err := cm.Marshal()
	if err != nil {
		b.Fatal(err)
	}
	env, err := (&runtime.Unknown{TypeMeta: runtime.TypeMeta{APIVersion: "v1", Kind: "ConfigMap"}, Raw: raw}).Marshal()
	if err != nil {
		b.Fatal(err)
	}
	return append([]byte("k8s\x00"), env...)
}

func openJournalRes(b *testing.B, res journal.Resource) *journal.Journal {
	b.Helper()
	j, err := journal.Open(b.TempDir()+"/journal.db", &journal.Options{Resource: &res, NoSync: true})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = j.Close() })
	return j
}

// namedJournal is a fixture journal and the name its benchmarks carry.
type namedJournal struct {
	name string
	j    *journal.Journal
}

// readerFixtures returns the fixture journal with JSON objects and the one
// with protobuf objects, named for their benchmarks, and the informer
// indexer of the same objects.
func readerFixtures(b *testing.B) ([]namedJournal, toolscache.Indexer) {
	b.Helper()
	j, idx := listerFixture(b, false)
	jpb, _ := listerFixture(b, true)
	return []namedJournal{{"journal", j}, {"journal-protobuf", jpb}}, idx
}

// decodeEach decodes obj into a new ConfigMap with decode once per
// iteration of b.
func decodeEach(b *testing.B, obj []byte, decode func([]byte, *corev1.ConfigMap) error) {
	b.Helper()
	for b.Loop() {
		var cm corev1.ConfigMap
		if err := decode(obj, &cm); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkReaderGet(b *testing.B) {
	journals, idx := readerFixtures(b)
	ctx := context.Background()
	name := func(n int) string { return fmt.Sprintf("cm-%06d", n%listerN) }
	for _, f := range journals {
		b.Run(f.name+"/typed", func(b *testing.B) {
			r := cache.NewReader(f.j, scheme.Scheme)
			n := 0
			for b.Loop() {
				var cm corev1.ConfigMap
				if err := r.Get(ctx, client.ObjectKey{Namespace: "bench", Name: name(n)}, &cm); err != nil {
					b.Fatal(err)
				}
				n++
			}
		})
		b.Run(f.name+"/unstructured", func(b *testing.B) {
			r := cache.NewReader(f.j, scheme.Scheme)
			n := 0
			for b.Loop() {
				u := &unstructured.Unstructured{}
				u.SetAPIVersion("v1")
				u.SetKind("ConfigMap")
				if err := r.Get(ctx, client.ObjectKey{Namespace: "bench", Name: name(n)}, u); err != nil {
					b.Fatal(err)
				}
				n++
			}
		})
	}
	b.Run("decode-only/protobuf", func(b *testing.B) {
		o, _, err := scheme.Codecs.UniversalDeserializer().Decode(listerObject(0, "bench"), nil, nil)
		if err != nil {
			b.Fatal(err)
		}
		decodeEach(b, protoEnvelope(b, o.(*corev1.ConfigMap)), func(obj []byte, cm *corev1.ConfigMap) error {
			return cache.DecodeInto(obj, cm)
		})
	})
	b.Run("decode-only/sigs.k8s.io-json", func(b *testing.B) {
		decodeEach(b, listerObject(0, "bench"), func(obj []byte, cm *corev1.ConfigMap) error {
			return sjson.UnmarshalCaseSensitivePreserveInts(obj, cm)
		})
	})
	b.Run("decode-only", func(b *testing.B) {
		decodeEach(b, listerObject(0, "bench"), func(obj []byte, cm *corev1.ConfigMap) error {
			_, _, err := scheme.Codecs.UniversalDeserializer().Decode(obj, nil, cm)
			return err
		})
	})
	b.Run("informer/get+deepcopy", func(b *testing.B) {
		l := listersv1.NewConfigMapLister(idx)
		n := 0
		for b.Loop() {
			cm, err := l.ConfigMaps("bench").Get(name(n))
			if err != nil {
				b.Fatal(err)
			}
			_ = cm.DeepCopy()
			n++
		}
	})
}

func BenchmarkReaderList(b *testing.B) {
	journals, idx := readerFixtures(b)
	ctx := context.Background()
	for _, f := range journals {
		b.Run(f.name+"/typed", func(b *testing.B) {
			r := cache.NewReader(f.j, scheme.Scheme)
			for b.Loop() {
				var l corev1.ConfigMapList
				if err := r.List(ctx, &l, client.InNamespace("bench")); err != nil || len(l.Items) != listerN {
					b.Fatal(len(l.Items), err)
				}
			}
		})
	}
	b.Run("informer/list+deepcopy", func(b *testing.B) {
		l := listersv1.NewConfigMapLister(idx)
		for b.Loop() {
			items, err := l.ConfigMaps("bench").List(labels.Everything())
			if err != nil || len(items) != listerN {
				b.Fatal(len(items), err)
			}
			out := make([]runtime.Object, 0, len(items))
			for _, cm := range items {
				out = append(out, cm.DeepCopy())
			}
		}
	})
}
