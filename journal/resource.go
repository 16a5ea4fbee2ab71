package journal

import (
	"encoding/json"
	"fmt"

	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/watchjournal/watchjournal/internal/storage"
	"github.com/watchjournal/watchjournal/journal/internal/storedobj"
)

// Resource names what a journal file watches: one GVR, optionally one
// namespace, optionally label and field selectors (API concepts, "List and
// Watch filtering"). A file records one Resource for its whole life.
type Resource struct {
	// GVR is the group, version and resource, e.g. {"", "v1", "configmaps"}.
	GVR schema.GroupVersionResource `json:"gvr"`
	// Namespace limits the watch to one namespace; empty means all
	// namespaces (or a cluster-scoped resource).
	Namespace string `json:"namespace,omitempty"`
	// LabelSelector is passed as the labelSelector parameter.
	LabelSelector string `json:"labelSelector,omitempty"`
	// FieldSelector is passed as the fieldSelector parameter.
	FieldSelector string `json:"fieldSelector,omitempty"`
	// ShardSelector binds the file to a set of ranges of the 64-bit FNV-1a
	// hash of its objects' UIDs, in KEP-5866's shardSelector syntax
	// (shardRange(object.metadata.uid, '0x…', '0x…') terms joined by ||,
	// as package shards writes it): the index and journal hold only keys
	// whose UID hashes into it. Package reconcile sends it as the shardSelector
	// parameter where the apiserver serves it (feature gate
	// ShardedListAndWatch), and filters on the client otherwise. Empty
	// means unsharded. It is part of the file's identity, compared in
	// canonical form, and changes only through a Reshard (shard.go).
	ShardSelector string `json:"shardSelector,omitempty"`
	// MetadataOnly keeps only each object's kind, apiVersion and metadata
	// (without kubectl's last-applied annotation) in the journal. It is part
	// of the file's identity, so one file never mixes full objects with
	// metadata-only ones. For Secrets, package reconcile requires it unless
	// its SecretPayloads option opts in and the journal seals them
	// (Options.Keyring, seal.go).
	MetadataOnly bool `json:"metadataOnly,omitempty"`

	// Kind and APIVersion are the kind and apiVersion of the objects, e.g.
	// "ConfigMap" and "v1" (API conventions, "Types (Kinds)"). They describe
	// the resource rather than choose it, so they are not part of the
	// file's identity: Open matches a Resource whether or not they are set,
	// and records them when the file has none. Package reconcile fills them
	// from discovery (reconcile.New). With them, every event decodes from
	// the file alone, a tombstone (an Event without Object) included; see
	// Journal.TypeMeta for files written before they were recorded.
	Kind       string `json:"kind,omitempty"`
	APIVersion string `json:"apiVersion,omitempty"`
}

// identity returns r without the fields that describe rather than choose
// the resource (Kind, APIVersion): what Open compares.
func (r Resource) identity() Resource {
	r.Kind, r.APIVersion = "", ""
	return r
}

// String returns a short form such as "configmaps.v1 -n wj -l app=x".
func (r Resource) String() string {
	s := r.GVR.Resource + "." + r.GVR.Version
	if r.GVR.Group != "" {
		s += "." + r.GVR.Group
	}
	if r.Namespace != "" {
		s += " -n " + r.Namespace
	}
	if r.LabelSelector != "" {
		s += " -l " + r.LabelSelector
	}
	if r.FieldSelector != "" {
		s += " --field-selector " + r.FieldSelector
	}
	if r.MetadataOnly {
		s += " --metadata-only"
	}
	if r.ShardSelector != "" {
		s += " --shard " + shardSummary(r.ShardSelector)
	}
	return s
}

func (r Resource) encode() []byte { b, _ := json.Marshal(r); return b }

// recordedResource returns the resource the file records in tx; none
// recorded is an error of op.
func recordedResource(tx storage.Tx, op string) (Resource, error) {
	r, ok, err := decodeResource(tx.Meta(metaResource))
	if err == nil && !ok {
		err = fmt.Errorf("journal: %s: the file records no resource", op)
	}
	return r, err
}

// decodeResource decodes a recorded resource: false when none is recorded,
// an error matching ErrBadRecord when the record does not decode.
func decodeResource(b []byte) (Resource, bool, error) {
	var r Resource
	if len(b) == 0 {
		return Resource{}, false, nil
	}
	if err := json.Unmarshal(b, &r); err != nil {
		return Resource{}, false, fmt.Errorf("%w: recorded resource: %v", ErrBadRecord, err)
	}
	return r, true, nil
}

// SetKind records the kind and apiVersion of the resource's objects in the
// file, in one write transaction, if the file records none yet (an
// existing, different pair is kept: a resource's kind does not change). It
// returns ErrReadOnly on a read-only journal and an error when the file
// records no resource. Package reconcile calls it from New.
func (w *Writer) SetKind(kind, apiVersion string) error {
	j := w.j
	if kind == "" || apiVersion == "" {
		return fmt.Errorf("journal: SetKind: empty kind %q or apiVersion %q", kind, apiVersion)
	}
	return j.store.Update(func(tx storage.Tx) error {
		r, err := recordedResource(tx, "SetKind")
		if err != nil || r.Kind != "" {
			return err
		}
		r.Kind, r.APIVersion = kind, apiVersion
		return tx.SetMeta(metaResource, r.encode())
	})
}

// typeMetaScan bounds how many events TypeMeta reads looking for an object
// in a file that records no kind.
const typeMetaScan = 4096

// TypeMeta returns the kind and apiVersion of the journal's objects, read
// from the file alone: the recorded Resource.Kind and APIVersion, or, for a
// file written before they were recorded (and not yet opened by
// reconcile.New since), those of the first retained event that carries an
// object, among the first 4096. It returns ErrNoKind when neither is
// there (an empty journal of an old file): the caller then knows kinds
// only from objects it decodes later.
func (j *Journal) TypeMeta() (kind, apiVersion string, err error) {
	r, ok, err := j.Resource()
	if err != nil {
		return "", "", err
	}
	if ok && r.Kind != "" {
		return r.Kind, r.APIVersion, nil
	}
	from := uint64(0)
	for n := 0; n < typeMetaScan; {
		evs, err := j.Read(from, 256)
		if err != nil {
			return "", "", err
		}
		if len(evs) == 0 {
			break
		}
		for _, e := range evs {
			if e.Object == nil {
				continue
			}
			if apiVersion, kind, err := storedobj.TypeMeta(e.Object); err == nil && kind != "" && apiVersion != "" {
				return kind, apiVersion, nil
			}
		}
		n += len(evs)
		from = evs[len(evs)-1].Offset + 1
	}
	return "", "", ErrNoKind
}
