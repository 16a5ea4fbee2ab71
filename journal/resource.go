package journal

import (
	"encoding/json"
	"fmt"

	"k8s.io/apimachinery/pkg/runtime/schema"
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
	// MetadataOnly keeps only each object's kind, apiVersion and metadata
	// (without kubectl's last-applied annotation) in the journal. It is part
	// of the file's identity, so one file never mixes full objects with
	// metadata-only ones. For Secrets, package reconcile requires it unless
	// its SecretPayloads option opts in.
	MetadataOnly bool `json:"metadataOnly,omitempty"`
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
	return s
}

func (r Resource) encode() []byte { b, _ := json.Marshal(r); return b }

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
