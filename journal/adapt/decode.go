package adapt

import (
	"encoding/json"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/watchjournal/watchjournal/journal"
)

// DecodeFunc turns an object as stored (JSON as served, with kind and
// apiVersion) into a runtime.Object.
type DecodeFunc func([]byte) (runtime.Object, error)

// Unstructured decodes into *unstructured.Unstructured. It is the default.
func Unstructured(b []byte) (runtime.Object, error) {
	u := &unstructured.Unstructured{}
	if err := u.UnmarshalJSON(b); err != nil {
		return nil, err
	}
	return u, nil
}

// decoder remembers the last kind and apiVersion seen, to label tombstones.
type decoder struct {
	decode           DecodeFunc
	kind, apiVersion string
}

// object returns the event's object; for a tombstone, or an event stored
// without its object, a metadata-only one.
func (d *decoder) object(e journal.Event) (runtime.Object, error) {
	if e.Object != nil {
		var tm metav1.TypeMeta
		if json.Unmarshal(e.Object, &tm) == nil && tm.Kind != "" {
			d.kind, d.apiVersion = tm.Kind, tm.APIVersion
		}
		return d.decode(e.Object)
	}
	return d.decode(d.metadataOnly(e, e.ResourceVersion))
}

// metadataOnly returns the JSON of an object that carries only what the
// index knows of e's key, at resourceVersion rv.
func (d *decoder) metadataOnly(e journal.Event, rv string) []byte {
	ns, name, found := strings.Cut(e.Key, "/")
	if !found {
		ns, name = "", e.Key
	}
	m := map[string]any{
		"metadata": map[string]any{"name": name, "namespace": ns, "uid": e.UID, "resourceVersion": rv},
	}
	if d.kind != "" {
		m["kind"], m["apiVersion"] = d.kind, d.apiVersion
	}
	b, _ := json.Marshal(m)
	return b
}
