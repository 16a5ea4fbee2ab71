package reconcile

import (
	"path/filepath"
	"testing"

	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/watchjournal/watchjournal/journal"
)

// A built-in group version can hold a kind this build's scheme lacks (a
// newer server): such a journal is watched in JSON, whose objects can be
// decoded again; a kind not recorded yet keeps the choice by group version.
func TestProtoKnown(t *testing.T) {
	for _, tt := range []struct {
		gvr        schema.GroupVersionResource
		kind, apiV string
		want       bool
	}{
		{schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}, "ConfigMap", "v1", true},
		{schema.GroupVersionResource{Group: "apps", Version: "v1", Resource: "deployments"}, "Deployment", "apps/v1", true},
		{schema.GroupVersionResource{Group: "apps", Version: "v1", Resource: "rollouts"}, "Rollout", "apps/v1", false},
		{schema.GroupVersionResource{Group: "apps", Version: "v1", Resource: "rollouts"}, "", "", true},
	} {
		res := journal.Resource{GVR: tt.gvr}
		j, err := journal.Open(filepath.Join(t.TempDir(), "j.db"), &journal.Options{Resource: &res, NoSync: true})
		if err != nil {
			t.Fatal(err)
		}
		if tt.kind != "" {
			if err := j.Writer().SetKind(tt.kind, tt.apiV); err != nil {
				t.Fatal(err)
			}
		}
		if got := protoKnown(j); got != tt.want {
			t.Errorf("%s kind %q: protoKnown = %v; want %v", tt.gvr, tt.kind, got, tt.want)
		}
		_ = j.Close()
	}
}

// New's discovery may fail and the kind be recorded later by its retry
// (retryKind), which calls checkProto again: the next requests ask for
// JSON once the recorded kind is one the scheme lacks.
func TestCheckProto_AfterKindRecordedLater(t *testing.T) {
	res := journal.Resource{GVR: schema.GroupVersionResource{Group: "apps", Version: "v1", Resource: "rollouts"}}
	j, err := journal.Open(filepath.Join(t.TempDir(), "j.db"), &journal.Options{Resource: &res, NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	defer j.Close()
	l := &Loop{j: j, c: &client{}}
	l.c.proto.Store(true)
	l.checkProto() // New: no kind recorded yet
	if !l.c.proto.Load() {
		t.Fatal("protobuf turned off before the kind was known")
	}
	if err := j.Writer().SetKind("Rollout", "apps/v1"); err != nil { // the retry records it
		t.Fatal(err)
	}
	l.checkProto()
	if l.c.proto.Load() {
		t.Fatal("protobuf still asked for a kind the scheme lacks")
	}
}
