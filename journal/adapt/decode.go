package adapt

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/runtime"

	"github.com/watchjournal/watchjournal/journal"
	"github.com/watchjournal/watchjournal/journal/internal/storedobj"
)

// unstructuredObject decodes into *unstructured.Unstructured
// (journal/cache's Unstructured as a runtime.Object): Options.Decode's
// default.
func unstructuredObject(b []byte) (runtime.Object, error) {
	u, err := storedobj.Unstructured(b)
	if err != nil {
		return nil, err // not a typed nil
	}
	return u, nil
}

// decoder labels objects built from the index (tombstones, the old side of
// an update) with the kind and apiVersion the file records
// (journal.TypeMeta): it depends on nothing this process saw before, so a
// fresh process whose first event is a tombstone decodes it.
type decoder struct {
	decode           func([]byte) (runtime.Object, error) // Options.Decode
	j                *journal.Journal
	kind, apiVersion string
}

// typeMeta returns the file's kind and apiVersion, read once.
func (d *decoder) typeMeta() (string, string, error) {
	if d.kind == "" {
		k, v, err := d.j.TypeMeta()
		if err != nil {
			return "", "", err
		}
		d.kind, d.apiVersion = k, v
	}
	return d.kind, d.apiVersion, nil
}

// object returns the event's object; for a tombstone, or an event stored
// without its object, a metadata-only one.
func (d *decoder) object(e journal.Event) (runtime.Object, error) {
	if e.Object != nil {
		return d.decode(e.Object)
	}
	return d.metadataOnly(e, e.ResourceVersion)
}

// metadataOnly returns an object that carries only what the index knows of
// e's key, at resourceVersion rv, with the file's kind and apiVersion.
func (d *decoder) metadataOnly(e journal.Event, rv string) (runtime.Object, error) {
	kind, apiVersion, err := d.typeMeta()
	if err != nil {
		if errors.Is(err, journal.ErrNoKind) {
			return nil, fmt.Errorf("%s %q has no object and %w (a file written before kinds were recorded: open it once with reconcile.New)", e.Type, e.Key, err)
		}
		return nil, err
	}
	ns, name, found := strings.Cut(e.Key, "/")
	if !found {
		ns, name = "", e.Key
	}
	b, _ := json.Marshal(map[string]any{
		"kind": kind, "apiVersion": apiVersion,
		"metadata": map[string]any{"name": name, "namespace": ns, "uid": e.UID, "resourceVersion": rv},
	})
	return d.decode(b)
}
