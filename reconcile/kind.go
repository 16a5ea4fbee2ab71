package reconcile

// The kind of the journaled objects, recorded in the file (issue 10, item
// 1): a tombstone (a DELETED inferred by a relist) carries no object, so a
// consumer in a fresh process can label it only from the file. New asks
// discovery once per file, the way client-go's RESTMapper does
// (/api/v1, /apis/<group>/<version>), and records the answer with
// journal.SetKind; a file that has it skips the request.

import (
	"fmt"
	"time"

	"k8s.io/client-go/discovery"
	"k8s.io/client-go/rest"

	"github.com/watchjournal/watchjournal/journal"
)

// discoveryTimeout bounds New's one discovery request.
const discoveryTimeout = 10 * time.Second

// recordKind fills the journal's Kind and APIVersion from discovery when
// the file records none. A discovery failure is returned; New logs it and
// goes on (the objects themselves carry their kind, and journal.TypeMeta
// falls back to them), so an apiserver that is down at start does not stop
// the loop.
func recordKind(cfg *rest.Config, j *journal.Journal, res journal.Resource) error {
	if res.Kind != "" {
		return nil
	}
	c := rest.CopyConfig(cfg)
	c.Timeout = discoveryTimeout
	dc, err := discovery.NewDiscoveryClientForConfig(c)
	if err != nil {
		return err
	}
	gv := res.GVR.GroupVersion().String()
	list, err := dc.ServerResourcesForGroupVersion(gv)
	if err != nil {
		return fmt.Errorf("reconcile: discovery of %s: %w", gv, err)
	}
	for _, r := range list.APIResources {
		if r.Name == res.GVR.Resource {
			return j.SetKind(r.Kind, gv)
		}
	}
	return fmt.Errorf("reconcile: discovery of %s: no resource %q", gv, res.GVR.Resource)
}
